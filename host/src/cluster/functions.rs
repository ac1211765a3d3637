//! The function store a cluster's servers share
//! ([`crate::store::SharedFunctions`]): each function's versions in the
//! control topic (`function/<name>`, every change one transaction:
//! [`ControlTopic::transact`]), the components in the cluster's storage by
//! SHA-256 ([`FunctionBlobs`]), where every worker fetches them.

use std::collections::BTreeMap;

use super::blobs::FunctionBlobs;
use super::control::{ControlChange, ControlError, ControlTopic};
use crate::store::{Decide, SharedFunctions, StoreError};

/// A cluster's functions: the index in `control`, the components in
/// `blobs`.
pub struct ClusterFunctions {
    control: ControlTopic,
    blobs: FunctionBlobs,
}

impl ClusterFunctions {
    /// The functions of `control`'s cluster, stored in `blobs`.
    pub fn new(control: ControlTopic, blobs: FunctionBlobs) -> Self {
        Self { control, blobs }
    }
}

/// A failure of the control topic or the storage, as the store says it.
fn unavailable(error: impl std::fmt::Display) -> StoreError {
    StoreError::Cluster(error.to_string())
}

impl From<ControlError> for StoreError {
    fn from(error: ControlError) -> Self {
        unavailable(error)
    }
}

impl SharedFunctions for ClusterFunctions {
    fn read(&self) -> Result<BTreeMap<String, Vec<u8>>, StoreError> {
        Ok(self.control.read_state()?.functions)
    }

    fn change(&self, name: &str, decide: &mut Decide<'_>) -> Result<(), StoreError> {
        self.control.transact(|state| {
            let changes = match decide(&state.functions)? {
                Some(record) => vec![ControlChange::Functions(name.to_string(), record)],
                None => Vec::new(),
            };
            Ok::<_, StoreError>(((), changes))
        })
    }

    fn put(&self, component: &[u8]) -> Result<String, StoreError> {
        self.blobs.put(component).map_err(unavailable)
    }

    fn get(&self, sha256: &str) -> Result<Vec<u8>, StoreError> {
        self.blobs.get(sha256).map_err(unavailable)
    }
}
