//! Tests of cooking, grouping and storage against independent, plain reference code
//! (`reference`): BFS labelling, a Moore trace over a set of cells, O(n²) grouping.

mod cook;
mod group;
mod queries;
mod reference;
mod store;
