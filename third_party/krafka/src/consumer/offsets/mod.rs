//! Where positions come from and where they go: the one `ListOffsets` path
//! and position initialisation (`reset`), leader-epoch validation and
//! truncation (`validate`), and offset commits (`commit`).

mod commit;
mod reset;
mod validate;

pub(super) use commit::CommitRequestOffsets;
pub(super) use reset::needs_metadata_refresh;
