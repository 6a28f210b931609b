//! The isolation probe: a marker written to and read from this container's
//! own filesystem, at `<HERMES_STATE_DIR>/probe-marker` (root-only, 0700
//! directory, 0600 file). Two containers that can read each other's marker
//! are not isolated; the object compares what it wrote with what it reads.

use hermes_protocol::{ProbeRead, ProbeWrite};

use crate::app::App;
use crate::error::SupervisorError;
use crate::fsutil;

pub const MARKER_FILE: &str = "probe-marker";
/// What a read returns when no marker was written in this container.
pub const NONE: &str = "(none)";

fn io_error(e: std::io::Error) -> SupervisorError {
    SupervisorError::internal("probe marker", e.kind())
}

/// Markers are short printable text (`marker-for-<id>-<nonce>`).
pub fn validate(marker: &str) -> Result<(), SupervisorError> {
    if marker.is_empty() || marker.len() > 256 || !marker.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(SupervisorError::BadRequest(
            "marker must be 1..256 printable ASCII characters without spaces".into(),
        ));
    }
    Ok(())
}

pub fn write(app: &App, body: &ProbeWrite) -> Result<ProbeRead, SupervisorError> {
    validate(&body.marker)?;
    let dir = fsutil::ensure_dir_path(&app.settings.state_dir, 0o700, None).map_err(io_error)?;
    fsutil::write_file_at(&dir, MARKER_FILE, body.marker.as_bytes(), 0o600, None)
        .map_err(io_error)?;
    read(app)
}

pub fn read(app: &App) -> Result<ProbeRead, SupervisorError> {
    let dir = match fsutil::open_dir_nofollow(&app.settings.state_dir) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(ProbeRead {
                ok: true,
                read: NONE.into(),
            })
        }
        Err(e) => return Err(io_error(e)),
    };
    match fsutil::read_file_at(&dir, MARKER_FILE) {
        Ok(bytes) => Ok(ProbeRead {
            ok: true,
            read: String::from_utf8_lossy(&bytes).into_owned(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ProbeRead {
            ok: true,
            read: NONE.into(),
        }),
        Err(e) => Err(io_error(e)),
    }
}
