//! How attributes map to `.npy` arrays, in both directions.
//!
//! A fixed-size, non-nullable attribute of `cell_val_num` n over a subarray of shape `S`:
//! - n = 1: dtype of the attribute's type (`int32` → `<i4`, ...), shape `S`; a `uint8` attribute
//!   also accepts `bool` (`|b1`) input, written as its 0/1 bytes;
//! - `float32`/`float64` with n = 2: `complex64`/`complex128` of shape `S` (read produces this),
//!   or the float type with shape `S + (2,)`;
//! - other n > 1: the value type with shape `S + (n,)`, C order only (each cell's values must be
//!   adjacent);
//! - `utf8` with n values: byte strings `|S<n>` of shape `S`.
//!
//! The bytes of the `.npy` data section are passed to the engine unchanged: C order is the
//! row-major layout, Fortran order the column-major one. Variable-length and nullable
//! attributes have no `.npy` form and are refused.

use anyhow::{bail, Result};
use tessera::{Attribute, CellValNum, Datatype, Layout};

use crate::npy::{shape_str, Dtype, Header, Kind};

/// What to tell users about attributes `.npy` cannot hold.
const PYTHON_HINT: &str = "use the Python API (`import tessera`), which returns offsets and validity as \
     separate arrays";

/// The `.npy` form of an attribute's cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NpyForm {
    /// Element dtype.
    pub(crate) dtype: Dtype,
    /// Size of a trailing axis holding the values of one cell, if any.
    pub(crate) values_axis: Option<u64>,
}

impl NpyForm {
    /// The shape of `cells_shape` cells in this form.
    pub(crate) fn shape(&self, cells_shape: &[u64]) -> Vec<u64> {
        let mut s = cells_shape.to_vec();
        s.extend(self.values_axis);
        s
    }
}

/// The dtype of one value of `t`, if `.npy` has one (UTF-8 is handled as byte strings).
pub(crate) fn value_dtype(t: Datatype) -> Option<Dtype> {
    let (kind, size) = match t {
        Datatype::Int8 => (Kind::Int, 1),
        Datatype::Int16 => (Kind::Int, 2),
        Datatype::Int32 => (Kind::Int, 4),
        Datatype::Int64 => (Kind::Int, 8),
        Datatype::UInt8 => (Kind::UInt, 1),
        Datatype::UInt16 => (Kind::UInt, 2),
        Datatype::UInt32 => (Kind::UInt, 4),
        Datatype::UInt64 => (Kind::UInt, 8),
        Datatype::Float32 => (Kind::Float, 4),
        Datatype::Float64 => (Kind::Float, 8),
        _ => return None,
    };
    Dtype::new(kind, size)
}

/// Refuses attributes without a `.npy` form; `verb` is "read" or "written".
///
/// # Errors
/// A variable-length or nullable attribute, or a type without a `.npy` dtype.
pub(crate) fn check_representable(a: &Attribute, verb: &str) -> Result<()> {
    if a.is_var() {
        bail!(
            "attribute {} is variable-length ({}, cell_val_num \"var\"): .npy cannot represent it, \
             so it cannot be {verb} here; {PYTHON_HINT}",
            a.name,
            a.datatype
        );
    }
    if a.nullable {
        bail!(
            "attribute {} is nullable: .npy cannot represent null cells, so it cannot be {verb} here; {PYTHON_HINT}",
            a.name
        );
    }
    if a.datatype != Datatype::Utf8 && value_dtype(a.datatype).is_none() {
        bail!("attribute {}: type {} has no .npy equivalent", a.name, a.datatype);
    }
    Ok(())
}

fn values_per_cell(a: &Attribute) -> u64 {
    match a.cell_val_num {
        CellValNum::Fixed(n) => u64::from(n),
        CellValNum::Var => 1,
    }
}

/// The form a read produces for attribute `a` (refusing ones that have none).
///
/// # Errors
/// As [`check_representable`].
pub(crate) fn read_form(a: &Attribute) -> Result<NpyForm> {
    check_representable(a, "read")?;
    let n = values_per_cell(a);
    if a.datatype == Datatype::Utf8 {
        let size = usize::try_from(n)?;
        return Ok(NpyForm { dtype: Dtype { kind: Kind::Bytes, size }, values_axis: None });
    }
    let base = value_dtype(a.datatype).ok_or_else(|| anyhow::anyhow!("attribute {}: no .npy dtype", a.name))?;
    if n == 2 && base.kind == Kind::Float {
        return Ok(NpyForm { dtype: Dtype { kind: Kind::Complex, size: base.size * 2 }, values_axis: None });
    }
    Ok(NpyForm { dtype: base, values_axis: (n > 1).then_some(n) })
}

/// The forms an input for `a` may take (the read form first).
fn input_forms(a: &Attribute) -> Result<Vec<NpyForm>> {
    let first = read_form(a)?;
    let mut forms = vec![first];
    let n = values_per_cell(a);
    if first.dtype.kind == Kind::Complex {
        if let Some(base) = value_dtype(a.datatype) {
            forms.push(NpyForm { dtype: base, values_axis: Some(n) });
        }
    }
    if a.datatype == Datatype::UInt8 {
        let b = Dtype { kind: Kind::Bool, size: 1 };
        forms.push(NpyForm { dtype: b, values_axis: first.values_axis });
    }
    Ok(forms)
}

/// What [`check_input`] concluded about one input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InputOrder {
    /// The layout the data is in.
    pub(crate) layout: Layout,
    /// Whether the data is the same in either layout (at most one axis of the cells longer than 1).
    pub(crate) either: bool,
}

/// Checks that `header` (of file `file`) holds cells of `a` over a subarray of `cells_shape`
/// (`spec` names that subarray in messages), and says which layout its data is in.
///
/// # Errors
/// A dtype other than the attribute's (no casting), a shape other than the subarray's, or a
/// Fortran-order array whose cells have several values.
pub(crate) fn check_input(
    a: &Attribute,
    header: &Header,
    cells_shape: &[u64],
    spec: &str,
    file: &str,
) -> Result<InputOrder> {
    let forms = input_forms(a)?;
    let Some(form) = forms.iter().find(|f| f.dtype == header.dtype) else {
        let want: Vec<String> = forms.iter().map(|f| f.dtype.to_string()).collect();
        let cast = forms[0].dtype.descr();
        bail!(
            "{file}: dtype {} does not match attribute {} ({}{}), which needs {}; no implicit casting is done \
             (convert with arr.astype('{cast}'))",
            header.dtype,
            a.name,
            a.datatype,
            match a.cell_val_num {
                CellValNum::Fixed(n) if n > 1 => format!(" x {n}"),
                _ => String::new(),
            },
            want.join(" or ")
        );
    };
    let want = form.shape(cells_shape);
    if header.shape != want {
        bail!(
            "{file}: shape {} does not match the subarray {spec}, which needs shape {} for attribute {}",
            shape_str(&header.shape),
            shape_str(&want),
            a.name
        );
    }
    if header.fortran_order && form.values_axis.is_some_and(|n| n > 1) {
        bail!(
            "{file}: Fortran-order data with {} values per cell on the last axis keeps a cell's values apart; \
             save it in C order (np.ascontiguousarray)",
            form.values_axis.unwrap_or(0)
        );
    }
    let either = cells_shape.iter().filter(|&&n| n > 1).count() <= 1;
    let layout = if header.fortran_order { Layout::ColMajor } else { Layout::RowMajor };
    Ok(InputOrder { layout, either })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn attr(t: Datatype, n: u32) -> Attribute {
        let mut a = Attribute::new("v", t);
        a.cell_val_num = CellValNum::Fixed(n);
        a
    }

    fn header(descr: &str, fortran: bool, shape: &[u64]) -> Header {
        Header { dtype: Dtype::parse(descr).unwrap(), fortran_order: fortran, shape: shape.to_vec() }
    }

    #[test]
    fn read_forms() {
        let f = |t, n| read_form(&attr(t, n)).unwrap();
        assert_eq!(f(Datatype::Int16, 1).dtype.descr(), "<i2");
        assert_eq!(f(Datatype::Float32, 2).dtype.descr(), "<c8");
        assert_eq!(f(Datatype::Float64, 2).dtype.descr(), "<c16");
        assert_eq!(f(Datatype::UInt32, 3), NpyForm { dtype: Dtype::parse("<u4").unwrap(), values_axis: Some(3) });
        assert_eq!(f(Datatype::Utf8, 4).dtype.descr(), "|S4");
        let mut v = attr(Datatype::Utf8, 1);
        v.cell_val_num = CellValNum::Var;
        assert!(read_form(&v).unwrap_err().to_string().contains("variable-length"));
        let mut n = attr(Datatype::Int32, 1);
        n.nullable = true;
        assert!(read_form(&n).unwrap_err().to_string().contains("Python API"));
    }

    #[test]
    fn inputs_are_checked_exactly() {
        let a = attr(Datatype::Float32, 1);
        let ok = check_input(&a, &header("<f4", true, &[3, 4]), &[3, 4], "1:3,1:4", "x.npy").unwrap();
        assert_eq!(ok, InputOrder { layout: Layout::ColMajor, either: false });
        let e = check_input(&a, &header("<f8", false, &[3, 4]), &[3, 4], "1:3,1:4", "x.npy").unwrap_err();
        assert!(e.to_string().contains("x.npy: dtype float64 (<f8) does not match attribute v (float32)"), "{e}");
        assert!(e.to_string().contains("astype('<f4')"), "{e}");
        let e = check_input(&a, &header("<f4", false, &[4, 3]), &[3, 4], "1:3,1:4", "x.npy").unwrap_err();
        assert!(e.to_string().contains("shape (4, 3) does not match the subarray 1:3,1:4, which needs shape (3, 4)"));
        // Complex or a trailing axis for 2-value floats.
        let z = attr(Datatype::Float32, 2);
        assert!(check_input(&z, &header("<c8", false, &[3, 4]), &[3, 4], "", "z").is_ok());
        assert!(check_input(&z, &header("<f4", false, &[3, 4, 2]), &[3, 4], "", "z").is_ok());
        assert!(check_input(&z, &header("<f4", true, &[3, 4, 2]), &[3, 4], "", "z").is_err());
        assert!(check_input(&z, &header("<f4", false, &[3, 4]), &[3, 4], "", "z").is_err());
        // bool for uint8; one long axis is either order.
        let u = attr(Datatype::UInt8, 1);
        let o = check_input(&u, &header("|b1", false, &[1, 9]), &[1, 9], "", "u").unwrap();
        assert!(o.either);
        assert!(check_input(&u, &header("|i1", false, &[1, 9]), &[1, 9], "", "u").is_err());
    }
}
