//! Build contexts and other tars sent to the engine, written to temporary files and streamed
//! from them, so that large repositories and root filesystems are not held in memory.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use tokio_util::io::ReaderStream;

use crate::error::{Error, Result};

fn dir_header() -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Directory);
    header.set_size(0);
    header.set_mode(0o755);
    header.set_mtime(0);
    header.set_cksum();
    header
}

/// A build context tar written to a temporary file.
pub(crate) struct Context {
    builder: tar::Builder<std::fs::File>,
    path: PathBuf,
}

impl Context {
    pub(crate) fn create(path: PathBuf) -> Result<Self> {
        let file = fs_err::File::create(&path).map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        let mut builder = tar::Builder::new(file.into_parts().0);
        builder.follow_symlinks(false);
        Ok(Self { builder, path })
    }

    fn io(&self, source: std::io::Error) -> Error {
        Error::Io {
            path: self.path.clone(),
            source,
        }
    }

    pub(crate) fn add_bytes(&mut self, name: &str, bytes: &[u8], mode: u32) -> Result<()> {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(mode);
        header.set_mtime(0);
        header.set_cksum();
        self.builder
            .append_data(&mut header, name, bytes)
            .map_err(|e| self.io(e))
    }

    pub(crate) fn add_dir_entry(&mut self, name: &str) -> Result<()> {
        let mut header = dir_header();
        self.builder
            .append_data(&mut header, name, std::io::empty())
            .map_err(|e| self.io(e))
    }

    pub(crate) fn add_file(&mut self, name: &str, host: &Path) -> Result<()> {
        let mut file = fs_err::File::open(host).map_err(|source| Error::Io {
            path: host.to_owned(),
            source,
        })?;
        self.builder
            .append_file(name, file.file_mut())
            .map_err(|source| Error::Io {
                path: host.to_owned(),
                source,
            })
    }

    pub(crate) fn add_dir(&mut self, name: &str, host: &Path) -> Result<()> {
        self.builder
            .append_dir_all(name, host)
            .map_err(|source| Error::Io {
                path: host.to_owned(),
                source,
            })
    }

    pub(crate) fn finish(mut self) -> Result<PathBuf> {
        self.builder.finish().map_err(|e| self.io(e))?;
        let path = self.path;
        let io = |source| Error::Io {
            path: path.clone(),
            source,
        };
        let mut file = self.builder.into_inner().map_err(io)?;
        file.flush().map_err(io)?;
        Ok(path)
    }
}

/// A file to stream as a request body (through `body_try_stream(ReaderStream::new(..))`), so that
/// large contexts and root filesystems are not held in memory.
pub(crate) async fn open_body(path: &Path) -> Result<ReaderStream<tokio::fs::File>> {
    let file = tokio::fs::File::open(path)
        .await
        .map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
    Ok(ReaderStream::new(file))
}
