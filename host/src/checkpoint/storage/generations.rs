//! Writer generations: a paused or cut-off writer (a zombie: a worker
//! stopped by SIGSTOP, a network cut, an expired session) cannot damage
//! what the newer run of the same pipeline or unit writes into the same
//! storage.
//!
//! Each run that checkpoints claims the next generation of its storage
//! before it restores, by creating `<base>/generations/<G>` create-only, G
//! one above every claim there (two claimers of one number: one wins, the
//! other takes the next). What a run writes carries its generation:
//! shared files are named `<hash>-g<G>.<ext>`, a snapshot's own files go
//! under `g<G>/` in its directory (two writers of one snapshot id never
//! overwrite each other's MANIFEST), and its metadata records G. Then:
//!
//! * before it completes a snapshot a run checks that no newer generation
//!   claimed the storage, and stops ([`CheckpointError::Superseded`]) if
//!   one did;
//! * retention never deletes what a newer generation wrote — its shared
//!   files, its snapshots complete or not — nor any checkpoint from the
//!   newest one the run knows committed onwards (the one a new owner
//!   restores from, and whose files it goes on referencing).
//!
//! The check is not atomic with the writes after it (a writer may pause
//! between them), so the retention rules are what keep a zombie harmless;
//! the check makes it stop soon and say why. Files written before
//! generations existed count as generation 0.

use std::collections::BTreeSet;

use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload};

use super::{CheckpointError, CheckpointStorage};

/// The directory of generation claims under a pipeline's storage.
const CLAIMS: &str = "generations";

/// How many times a claim is tried when others claim at the same time.
const CLAIM_ATTEMPTS: u32 = 16;

impl CheckpointStorage {
    /// This writer's generation: `0` until [`Self::claim_generation`].
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Claim the next generation of this storage for this writer: from now
    /// on a writer of an older generation stops before completing a
    /// snapshot and never deletes what this one writes.
    pub fn claim_generation(&mut self) -> Result<u64, CheckpointError> {
        for _ in 0..CLAIM_ATTEMPTS {
            let next = self.claims()?.last().copied().unwrap_or(0) + 1;
            let path = self.claims_dir().join(format!("{next:020}"));
            let body = serde_json::json!({
                "pid": std::process::id(),
                "claimed_at": crate::clock::now_millis(),
            });
            let payload = PutPayload::from(serde_json::to_vec(&body)?);
            let create = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
            match self.runtime.block_on(self.store.put_opts(&path, payload.clone(), create)) {
                Ok(_) => {}
                // Another writer claimed `next` first: take the one after.
                Err(object_store::Error::AlreadyExists { .. }) => continue,
                Err(object_store::Error::NotImplemented { .. }) => {
                    tracing::warn!(location = %self.describe(&path), "the checkpoint store cannot write create-only (conditional put disabled?); claiming the generation unconditionally");
                    self.runtime.block_on(self.store.put(&path, payload))?;
                }
                Err(e) => return Err(e.into()),
            }
            self.generation = next;
            tracing::debug!(generation = next, "claimed checkpoint storage");
            return Ok(next);
        }
        Err(CheckpointError::Corrupt(format!(
            "could not claim a generation of {} in {CLAIM_ATTEMPTS} attempts: other runs keep claiming it at the same time (is the pipeline started in a loop by several processes?)",
            self.describe(&self.base)
        )))
    }

    /// Stop unless this writer's generation is still the newest.
    pub fn check_current(&self) -> Result<(), CheckpointError> {
        match self.claims()?.last() {
            Some(&newer) if newer > self.generation => Err(CheckpointError::Superseded {
                location: self.describe(&self.base),
                generation: self.generation,
                newer,
            }),
            _ => Ok(()),
        }
    }

    /// The name under `shared/` of an immutable file whose content hashes
    /// to `hash`, stored by this writer, with extension `extension`.
    pub fn shared_name(&self, hash: u128, extension: &str) -> String {
        match self.generation {
            0 => format!("{hash:032x}.{extension}"),
            generation => format!("{hash:032x}-g{generation}.{extension}"),
        }
    }

    /// Where the files of snapshot directory `dir` written by generation
    /// `generation` are (those not shared).
    pub fn files_dir(&self, dir: &Path, generation: u64) -> Path {
        match generation {
            0 => dir.clone(),
            generation => dir.clone().join(format!("g{generation}")),
        }
    }

    /// Delete every checkpoint and generation claim (a pipeline deleted):
    /// as the newest writer, so a run still writing stops.
    pub fn delete_all(mut self) -> Result<(), CheckpointError> {
        self.claim_generation()?;
        self.retain(0, None, None)?;
        let claims = self.claims_dir();
        self.runtime.block_on(async {
            let files: Vec<_> = self.store.list(Some(&claims)).try_collect().await?;
            for file in files {
                self.store.delete(&file.location).await?;
            }
            Ok(())
        })
    }

    /// Delete the claims of generations older than this writer's (the
    /// newest claim is all a check needs).
    pub(super) fn prune_claims(&self) -> Result<(), CheckpointError> {
        for generation in self.claims()?.range(..self.generation) {
            let path = self.claims_dir().join(format!("{generation:020}"));
            match self.runtime.block_on(self.store.delete(&path)) {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    fn claims_dir(&self) -> Path {
        self.base.clone().join(CLAIMS)
    }

    /// The generations claimed and not pruned.
    fn claims(&self) -> Result<BTreeSet<u64>, CheckpointError> {
        let dir = self.claims_dir();
        let files: Vec<_> = self.runtime.block_on(self.store.list(Some(&dir)).try_collect())?;
        Ok(files.iter().filter_map(|f| f.location.filename()?.parse().ok()).collect())
    }
}

/// The generation that stored shared file `name` (`0`: before generations).
pub fn of_shared(name: &str) -> u64 {
    let stem = name.rsplit_once('.').map_or(name, |(stem, _)| stem);
    stem.rsplit_once("-g").and_then(|(_, generation)| generation.parse().ok()).unwrap_or(0)
}

/// The generation that wrote `location`, a file in snapshot directory
/// `dir` (`0`: before generations).
pub fn of_snapshot_file(dir: &Path, location: &Path) -> u64 {
    location
        .prefix_match(dir)
        .and_then(|mut parts| parts.next())
        .and_then(|part| part.as_ref().strip_prefix('g')?.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_are_read_back_from_names() {
        assert_eq!(of_shared("00ab.sst"), 0);
        assert_eq!(of_shared("00ab-g12.sst"), 12);
        assert_eq!(of_shared("00ab-g7.wcl"), 7);
        let dir = Path::from("p/chk-3");
        assert_eq!(of_snapshot_file(&dir, &Path::from("p/chk-3/g4/subtask-0/MANIFEST")), 4);
        assert_eq!(of_snapshot_file(&dir, &Path::from("p/chk-3/subtask-0/MANIFEST")), 0);
        assert_eq!(of_snapshot_file(&dir, &Path::from("p/chk-3/_metadata")), 0);
    }

    #[test]
    fn each_claim_takes_the_next_generation_and_supersedes_the_older() {
        let mut old = CheckpointStorage::open("memory://", "p").unwrap();
        assert_eq!(old.claim_generation().unwrap(), 1);
        old.check_current().unwrap();
        // Another handle on the same store (memory:// is per handle).
        let mut new =
            CheckpointStorage::with_store(old.store.clone(), String::new(), old.base.clone())
                .unwrap();
        assert_eq!(new.claim_generation().unwrap(), 2);
        new.check_current().unwrap();
        let error = old.check_current().unwrap_err();
        assert!(matches!(error, CheckpointError::Superseded { generation: 1, newer: 2, .. }));
        assert!(error.to_string().contains("generation 2"), "{error}");
        new.prune_claims().unwrap();
        assert_eq!(new.claims().unwrap(), BTreeSet::from([2]));
        assert!(old.check_current().is_err(), "a pruned claim leaves the newer one");
        assert_eq!(new.shared_name(0xab, "sst"), format!("{:032x}-g2.sst", 0xab));
        assert_eq!(of_shared(&new.shared_name(0xab, "sst")), 2);
    }

    /// A zombie (generation 1) wakes after a new owner (generation 2)
    /// restored its committed checkpoint 1 and is uploading checkpoint 3;
    /// it had checked it was current just before, so it completes its own
    /// checkpoint 3 and sweeps.
    #[test]
    fn a_zombie_never_deletes_or_overwrites_what_the_new_owner_needs() {
        let shared = |storage: &CheckpointStorage, id: u64| {
            let name = storage.shared_name(u128::from(id), "sst");
            storage.put_shared(&name, name.as_bytes().to_vec()).unwrap();
            name
        };
        let complete = |storage: &CheckpointStorage, id: u64, files: &[&str]| {
            let mut metadata = super::super::tests::metadata(id, files);
            metadata.generation = storage.generation();
            let dir = storage.files_dir(&storage.checkpoint_dir(id), storage.generation());
            storage.put(&dir, "subtask-0/MANIFEST", vec![storage.generation() as u8]).unwrap();
            storage.commit(&metadata)
        };
        let mut zombie = CheckpointStorage::open("memory://", "unit").unwrap();
        zombie.claim_generation().unwrap();
        let a1 = shared(&zombie, 1);
        complete(&zombie, 1, &[&a1]).unwrap();
        let a2 = shared(&zombie, 2);
        complete(&zombie, 2, &[&a2]).unwrap();

        // The new owner restores checkpoint 1 (the commit marker's) and
        // uploads checkpoint 3: a1 again, and a file of its own.
        let mut owner =
            CheckpointStorage::with_store(zombie.store.clone(), String::new(), zombie.base.clone())
                .unwrap();
        owner.claim_generation().unwrap();
        let b3 = shared(&owner, 3);
        let owner_files = owner.files_dir(&owner.checkpoint_dir(3), owner.generation());
        owner.put(&owner_files, "subtask-0/MANIFEST", vec![2]).unwrap();

        // The zombie completes its checkpoint 3 and sweeps keeping one.
        let z3 = shared(&zombie, 33);
        complete(&zombie, 3, &[&a2, &z3]).unwrap();
        zombie.sweep(1, None, Some(1)).unwrap();
        assert!(zombie.get_shared(&b3).is_ok(), "the new owner's upload in flight is kept");
        assert!(zombie.get_shared(&a1).is_ok(), "the committed checkpoint's files are kept");
        assert!(
            zombie.completed().unwrap().iter().any(|m| m.id == 1),
            "the committed checkpoint a new owner restores from is kept"
        );
        assert_eq!(
            owner.get_file(&owner_files, "subtask-0/MANIFEST").unwrap(),
            [2],
            "the zombie's files of the same checkpoint id went elsewhere"
        );
        // Then stops: it is not current.
        assert!(matches!(zombie.retain(1, None, Some(1)), Err(CheckpointError::Superseded { .. })));

        // The new owner's checkpoint 3 loses to the zombie's (create-only):
        // it fails loudly and its next run takes 4; it then sweeps the
        // zombie's leftovers (an older generation) as its own.
        assert!(matches!(
            complete(&owner, 3, &[&a1, &b3]),
            Err(CheckpointError::AlreadyCompleted { .. })
        ));
        complete(&owner, 4, &[&a1, &b3]).unwrap();
        let report = owner.retain(1, None, Some(4)).unwrap();
        assert_eq!(report.checkpoints, [1, 2, 3]);
        assert_eq!(report.shared_files, {
            let mut gone = vec![a2, z3];
            gone.sort();
            gone
        });
        assert!(owner.get_shared(&a1).is_ok() && owner.get_shared(&b3).is_ok());
    }
}
