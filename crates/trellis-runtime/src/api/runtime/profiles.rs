//! The façade's profile operations: [`Runtime`] checks a profile with the one admission and
//! keeps it in its state directory's profile store.

use std::path::PathBuf;

use super::Runtime;
use crate::graphspec::admission::{self, AdmitRequest, InputSource};
use crate::profiles::document::Profile;
use crate::profiles::name::ProfileName;
use crate::profiles::requests::{DeletedProfile, SaveProfile, SavedProfile};
use crate::profiles::store::{ExpectedRevision, ProfileListing, ProfileStore};
use crate::shared::error::RuntimeError;

impl Runtime {
    fn profile_store(&self) -> Result<ProfileStore, RuntimeError> {
        Ok(ProfileStore::open(self.home.root())?)
    }

    /// Every profile of this state directory, by name.
    pub fn profiles(&self) -> Result<ProfileListing, RuntimeError> {
        Ok(self.profile_store()?.list()?)
    }

    /// One profile, whole (the document `export` writes).
    pub fn profile(&self, name: &str) -> Result<Profile, RuntimeError> {
        let name = ProfileName::parse(name)?;
        Ok(self.profile_store()?.load(&name)?)
    }

    /// Admits the definition as `run --validate-only` would (a template taking a task and
    /// given none is checked with a placeholder task), then writes it as the profile's next
    /// revision if its current one is the one expected. A profile that cannot run is never
    /// written: the admission's error comes back as it is.
    pub fn save_profile(&self, request: SaveProfile) -> Result<SavedProfile, RuntimeError> {
        let name = ProfileName::parse(&request.name)?;
        request.definition.check()?;
        let store = self.profile_store()?;
        let check = request
            .definition
            .save_check_request(self.home.root().to_path_buf());
        let admitted = admission::admit(check)?;
        let (profile, previous) = store.save(
            &name,
            request.definition,
            admitted.identity(),
            request.expected,
            trellis_ledger::store::now_ms(),
        )?;
        Ok(SavedProfile {
            name: profile.name,
            revision: profile.revision,
            previous_revision: previous,
            identity: profile.identity,
            admission: admitted.summary(),
            notices: admitted.notices().to_vec(),
        })
    }

    /// Deletes a profile if its current revision is the one expected.
    pub fn delete_profile(
        &self,
        name: &str,
        expected: ExpectedRevision,
    ) -> Result<DeletedProfile, RuntimeError> {
        let name = ProfileName::parse(name)?;
        let revision = self.profile_store()?.delete(&name, expected)?;
        Ok(DeletedProfile {
            name: name.to_string(),
            revision,
        })
    }

    /// The admission request of a run of the profile `name` working in `workspace`: `input`
    /// replaces the profile's default input unless it is `InputSource::Default`.
    pub fn profile_request(
        &self,
        name: &str,
        input: InputSource,
        workspace: Option<PathBuf>,
    ) -> Result<AdmitRequest, RuntimeError> {
        Ok(self
            .profile(name)?
            .definition
            .admit_request(input, workspace))
    }
}
