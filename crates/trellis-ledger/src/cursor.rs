//! Opaque event cursors (`c1:<sequence>`, where `c1:0` is "before every event"); defined in the
//! run vocabulary.

pub use trellis_run_model::{Cursor, CursorError};
