//! A layer that is one file: an overlay-mode tool file, a copy seeded once into the state's
//! `files/` and bound writable, against the host file it was seeded from.

use std::ffi::OsStr;
use std::io;
use std::path::Path;

use super::fsops::{Meta, Type};
use super::walk::{Walker, added_or_modified, failure, same_file, special_name};
use super::{EntryType, Refusal};

impl Walker<'_> {
    /// A layer that is one file: the seeded copy `copy` (in `upper`) against the host's `name`
    /// (in `host`). Applying keeps the host file's mode (the copy's is airlock's own).
    pub(super) fn seeded(&mut self, copy: &OsStr, name: &OsStr) {
        let here = Path::new("");
        let (meta, on_host) = match (self.upper.stat(copy), self.host.stat(name)) {
            (Ok(Some(meta)), Ok(on_host)) => (meta, on_host),
            (Ok(None), _) => return,
            (Err(e), _) | (_, Err(e)) => {
                return self.failed(here, EntryType::File, "compare the copy", e);
            }
        };
        let refused = if meta.kind != Type::File {
            Some(Refusal::Special {
                what: special_name(meta.kind),
            })
        } else if meta.setid() {
            Some(Refusal::SetId { mode: meta.mode })
        } else if meta.uid != self.uid {
            Some(Refusal::NotYours { uid: meta.uid })
        } else {
            match on_host {
                Some(h) if h.kind == Type::Symlink => Some(Refusal::HostSymlink {
                    to: self.host.readlink(name).unwrap_or_default(),
                }),
                Some(h) if h.kind != Type::File => Some(failure(
                    "replace the host's entry",
                    io::Error::other("it is not a regular file any more"),
                )),
                Some(h) if h.uid != self.uid => Some(Refusal::HostNotYours { uid: h.uid }),
                _ => None,
            }
        };
        if on_host.is_some_and(|h| h.kind == Type::File)
            && meta.kind == Type::File
            && same_file(&self.upper, &self.host, copy, name)
        {
            if self.apply && refused.is_none() {
                self.settled.push(copy.to_owned());
                self.settle(here);
            }
            return;
        }
        let refused = match refused {
            None if self.apply => self.copy_seeded(copy, name, on_host).err(),
            refused => refused,
        };
        self.report(here, added_or_modified(on_host), EntryType::File, refused);
        self.settle(here);
    }

    fn copy_seeded(
        &mut self,
        copy: &OsStr,
        name: &OsStr,
        on_host: Option<Meta>,
    ) -> Result<(), Refusal> {
        let (mut from, meta) = self
            .upper
            .open_file(copy)
            .map_err(|e| failure("read the copy", e))?;
        if meta.setid() {
            return Err(Refusal::SetId { mode: meta.mode });
        }
        if meta.uid != self.uid {
            return Err(Refusal::NotYours { uid: meta.uid });
        }
        let mode = on_host.map_or(meta.mode, |h| h.mode) & 0o777;
        self.wrote = true;
        self.host
            .replace_file(name, &mut from, Some(mode), Some(meta.mtime))
            .map_err(|e| failure("write it on the host", e))?;
        self.settled.push(copy.to_owned());
        Ok(())
    }
}
