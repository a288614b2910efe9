//! Groups: a folder that holds arrays and other groups, and metadata of its own (docs/format.md,
//! "Groups"). A group is marked by its `__group` file; its members are the arrays and groups
//! directly inside its folder, found by listing it (no member list to keep in step with the
//! folder, so creating or removing a member needs nothing from the group). Its metadata is stored
//! and time-travelled exactly as an array's (`meta.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::context::Context;
use crate::error::{ArrayError, QueryError, Result};
use crate::footer::{seal, unseal};
use crate::fragment::now_ms;
use crate::meta::{read_meta, remove_replaced, write_meta, MetaValue};
use crate::paths::{GROUP_FILE, META_DIR, SCHEMA_DIR};
use crate::storage::StorageError;
use crate::Mode;

/// The footer magic of the `__group` file.
const GROUP_MAGIC: &[u8; 8] = b"TSRGROUP";

/// What is at a location: an array, a group, or neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    /// A Tessera array (a folder with a `__schema` folder).
    Array,
    /// A Tessera group (a folder with a `__group` file).
    Group,
}

impl ObjectKind {
    /// "array" or "group".
    pub fn name(self) -> &'static str {
        match self {
            ObjectKind::Array => "array",
            ObjectKind::Group => "group",
        }
    }
}

/// What is at `uri`: `None` when it is neither an array nor a group (or does not exist).
///
/// # Errors
/// A location that is not local.
pub fn object_kind(ctx: &Context, uri: impl AsRef<Path>) -> Result<Option<ObjectKind>> {
    let uri = ctx.resolve_uri(uri.as_ref())?;
    Ok(kind_at(ctx, &uri))
}

fn kind_at(ctx: &Context, uri: &Path) -> Option<ObjectKind> {
    let storage = ctx.storage();
    if storage.is_file(&uri.join(GROUP_FILE)) {
        Some(ObjectKind::Group)
    } else if storage.is_dir(&uri.join(SCHEMA_DIR)) {
        Some(ObjectKind::Array)
    } else {
        None
    }
}

/// An open group.
#[derive(Debug)]
pub struct Group {
    ctx: Context,
    uri: PathBuf,
    mode: Mode,
    /// Read mode: metadata entries after it are not seen. Write mode: the metadata timestamp.
    timestamp: Option<u64>,
}

impl Group {
    /// Creates an empty group at `uri` (a missing or empty folder).
    ///
    /// # Errors
    /// A location that is not local, something non-empty there, a storage failure.
    pub fn create(ctx: &Context, uri: impl AsRef<Path>) -> Result<()> {
        let uri = &ctx.resolve_uri(uri.as_ref())?;
        let storage = ctx.storage();
        if storage.is_file(uri) || (storage.is_dir(uri) && !storage.list_dir(uri)?.is_empty()) {
            return Err(ArrayError::AlreadyExists { path: uri.clone() }.into());
        }
        storage.create_dir_all(&uri.join(META_DIR))?;
        // The marker is written last and atomically: a folder without it is not a group.
        storage.write_atomic(&uri.join(GROUP_FILE), &seal(Vec::new(), GROUP_MAGIC))?;
        if let Some(parent) = uri.parent().filter(|p| !p.as_os_str().is_empty()) {
            storage.sync_dir(parent)?;
        }
        storage.sync_dir(uri)?;
        Ok(())
    }

    /// Opens the group at `uri`; `timestamp` as for [`Array::open_at`](crate::Array::open_at)
    /// (read: metadata as of then; write: the timestamp of metadata written).
    ///
    /// # Errors
    /// A location that is not local, a missing path, a folder that is not a group, a corrupt
    /// `__group` file.
    pub fn open(ctx: &Context, uri: impl AsRef<Path>, mode: Mode, timestamp: Option<u64>) -> Result<Self> {
        let uri = ctx.resolve_uri(uri.as_ref())?;
        let storage = ctx.storage();
        let marker = uri.join(GROUP_FILE);
        match storage.read_all(&marker) {
            Ok(bytes) => {
                unseal(&bytes, GROUP_MAGIC, &marker)?;
            }
            Err(StorageError::NotFound { .. }) if storage.is_dir(&uri) => {
                return Err(ArrayError::NotAGroup { path: uri }.into());
            }
            Err(StorageError::NotFound { .. }) => return Err(ArrayError::NotFound { path: uri }.into()),
            Err(e) => return Err(e.into()),
        }
        if let (Mode::Write, Some(t)) = (mode, timestamp) {
            if t > crate::MAX_WRITE_TIMESTAMP {
                return Err(QueryError::Timestamp {
                    uri: uri.display().to_string(),
                    timestamp: t,
                    detail: format!("a write timestamp is at most {}", crate::MAX_WRITE_TIMESTAMP),
                }
                .into());
            }
        }
        Ok(Self { ctx: ctx.clone(), uri, mode, timestamp })
    }

    /// Deletes the group's metadata files that a consolidation replaced
    /// ([`consolidate_metadata`](crate::consolidate_metadata)); returns their names. Readers
    /// see the same metadata before and after, at any timestamp.
    ///
    /// # Errors
    /// A location that is not a group, storage failures, corrupt metadata files.
    pub fn vacuum(ctx: &Context, uri: impl AsRef<Path>) -> Result<Vec<String>> {
        let group = Self::open(ctx, uri, Mode::Read, None)?;
        remove_replaced(ctx, &group.uri)
    }

    /// The group's location.
    pub fn uri(&self) -> &Path {
        &self.uri
    }

    /// The mode it was opened in.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The arrays and groups directly inside the group, sorted by name. Entries whose names
    /// start with `__` are the group's own; other files and folders are not members.
    ///
    /// # Errors
    /// Storage failures listing the folder.
    pub fn members(&self) -> Result<Vec<(String, ObjectKind)>> {
        let mut out: Vec<(String, ObjectKind)> = self
            .ctx
            .storage()
            .list_dir(&self.uri)?
            .into_iter()
            .filter(|n| !n.starts_with("__"))
            .filter_map(|n| kind_at(&self.ctx, &self.uri.join(&n)).map(|k| (n, k)))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// The location of member `name` (checked to be a plain name, not a path).
    ///
    /// # Errors
    /// A name that is empty, holds a path separator, is `.`/`..`, or starts with `__`.
    pub fn member_uri(&self, name: &str) -> Result<PathBuf> {
        let bad = name.is_empty()
            || name == "."
            || name == ".."
            || name.starts_with("__")
            || name.contains('/')
            || name.contains('\\')
            || name.contains('\0');
        if bad {
            return Err(QueryError::BadBuffer {
                attr: "group member".into(),
                detail: format!("{name:?} is not a member name (one path component, not starting with __)"),
            }
            .into());
        }
        Ok(self.uri.join(name))
    }

    /// The group's metadata as of its open timestamp.
    ///
    /// # Errors
    /// Write mode, storage failures, corrupt metadata files.
    pub fn metadata(&self) -> Result<BTreeMap<String, MetaValue>> {
        self.require(Mode::Read, "read metadata")?;
        read_meta(&self.ctx, &self.uri, self.timestamp.unwrap_or(u64::MAX))
    }

    /// Writes metadata puts (`Some`) and deletes (`None`) as one atomic file.
    ///
    /// # Errors
    /// Read mode, bad keys or values, storage failures.
    pub fn write_metadata(&self, changes: &[(&str, Option<MetaValue>)]) -> Result<()> {
        self.require(Mode::Write, "write metadata")?;
        write_meta(&self.ctx, &self.uri, Some(self.timestamp.unwrap_or_else(now_ms)), changes)
    }

    fn require(&self, mode: Mode, op: &'static str) -> Result<()> {
        if self.mode == mode {
            return Ok(());
        }
        Err(QueryError::WrongMode {
            uri: self.uri.display().to_string(),
            mode: self.mode.name(),
            op,
            needed: mode.name(),
        }
        .into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::{Array, ArraySchema, ArrayType, Attribute, Config, Datatype, Dimension};

    fn schema() -> ArraySchema {
        ArraySchema::builder(ArrayType::Dense)
            .dim(Dimension::new("r", Datatype::Int64, (0, 9), 5))
            .attr(Attribute::new("a", Datatype::Int32))
            .build()
            .unwrap()
    }

    #[test]
    fn members_are_the_arrays_and_groups_inside() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = Context::new(Config::new()).unwrap();
        let g = dir.path().join("g");
        Group::create(&ctx, &g).unwrap();
        Array::create(&ctx, g.join("b_array"), &schema()).unwrap();
        Group::create(&ctx, g.join("a_group")).unwrap();
        std::fs::create_dir(g.join("plain_folder")).unwrap();
        std::fs::write(g.join("notes.txt"), b"x").unwrap();
        let open = Group::open(&ctx, &g, Mode::Read, None).unwrap();
        let members = open.members().unwrap();
        assert_eq!(
            members,
            vec![("a_group".to_string(), ObjectKind::Group), ("b_array".to_string(), ObjectKind::Array)]
        );
        assert_eq!(object_kind(&ctx, &g).unwrap(), Some(ObjectKind::Group));
        assert_eq!(object_kind(&ctx, g.join("plain_folder")).unwrap(), None);
        for bad in ["", "..", "a/b", "__meta"] {
            assert!(open.member_uri(bad).is_err(), "{bad:?}");
        }
        assert!(matches!(Group::create(&ctx, &g), Err(Error::Array(ArrayError::AlreadyExists { .. }))));
        let e = Group::open(&ctx, g.join("b_array"), Mode::Read, None).unwrap_err();
        assert!(e.to_string().contains("is not a Tessera group"), "{e}");
        assert!(matches!(
            Group::open(&ctx, g.join("missing"), Mode::Read, None),
            Err(Error::Array(ArrayError::NotFound { .. }))
        ));
    }

    #[test]
    fn metadata_time_travels_and_a_corrupt_marker_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = Context::new(Config::new()).unwrap();
        let g = dir.path().join("g");
        Group::create(&ctx, &g).unwrap();
        let text = |s: &str| Some(MetaValue { datatype: Some(Datatype::Utf8), data: s.as_bytes().to_vec() });
        Group::open(&ctx, &g, Mode::Write, Some(10)).unwrap().write_metadata(&[("k", text("one"))]).unwrap();
        Group::open(&ctx, &g, Mode::Write, Some(20)).unwrap().write_metadata(&[("k", text("two"))]).unwrap();
        let at = |t| Group::open(&ctx, &g, Mode::Read, Some(t)).unwrap().metadata().unwrap();
        assert_eq!(at(15)["k"].data, b"one");
        assert_eq!(at(25)["k"].data, b"two");
        assert!(at(5).is_empty());
        let w = Group::open(&ctx, &g, Mode::Write, None).unwrap();
        assert!(w.metadata().is_err());
        let mut bytes = std::fs::read(g.join(GROUP_FILE)).unwrap();
        bytes[0] ^= 1;
        std::fs::write(g.join(GROUP_FILE), &bytes).unwrap();
        assert!(matches!(Group::open(&ctx, &g, Mode::Read, None), Err(Error::Corrupt { .. })));
    }
}
