//! The profile routes: saved run definitions kept in the serving host's state directory, each
//! change checked against the revision the client read, each save admitted by the one
//! admission (with the server's environment) before it is written.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use trellis_runtime::{ExpectedRevision, ProfileDefinition, SaveProfile};
use utoipa::{IntoParams, ToSchema};

use super::extract::{Path, Query};
use super::problems::{blocking, json_body};
use super::state::ApiState;
use crate::problem::Problem;
use crate::schemas::{
    DeletedProfileDoc, ProblemDoc, ProfileDefinitionDoc, ProfileDoc, ProfileListingDoc,
    SavedProfileDoc,
};

/// A new profile (`POST /profiles`): refused with 409 when the name is taken.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProfileCreateBody {
    pub name: String,
    #[schema(value_type = ProfileDefinitionDoc)]
    pub definition: ProfileDefinition,
}

/// A profile saved under the path's name (`PUT /profiles/{name}`): `revision` is the one the
/// client read (none: the profile must not exist yet), `force` replaces whatever is there.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProfileSaveBody {
    #[schema(value_type = ProfileDefinitionDoc)]
    pub definition: ProfileDefinition,
    pub revision: Option<u64>,
    #[serde(default)]
    pub force: bool,
}

/// Which revision a deletion removes.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ProfileDeleteQuery {
    /// The revision the client read; a profile changed since is kept (409).
    pub revision: Option<u64>,
    /// Delete whatever revision it is at.
    pub force: Option<bool>,
}

fn expected(revision: Option<u64>, force: bool) -> ExpectedRevision {
    match (revision, force) {
        (_, true) => ExpectedRevision::Any,
        (Some(revision), false) => ExpectedRevision::At(revision),
        (None, false) => ExpectedRevision::New,
    }
}

async fn save(state: &ApiState, request: SaveProfile) -> Result<Response, Problem> {
    let runtime = state.runtime.clone();
    let saved = blocking(move || runtime.save_profile(request)).await?;
    let status = if saved.previous_revision.is_none() {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(saved)).into_response())
}

/// Every profile, by name.
#[utoipa::path(
    get, path = "/api/v1/profiles", tag = "profiles",
    responses((status = 200, body = ProfileListingDoc)),
)]
pub async fn list(State(state): State<ApiState>) -> Result<Response, Problem> {
    let runtime = state.runtime.clone();
    let listing = blocking(move || runtime.profiles()).await?;
    Ok(Json(listing).into_response())
}

/// Creates a profile after admitting it as `run --validate-only` would.
#[utoipa::path(
    post, path = "/api/v1/profiles", tag = "profiles",
    request_body = ProfileCreateBody,
    responses(
        (status = 201, description = "saved at revision 1", body = SavedProfileDoc),
        (status = 400, description = "a malformed body or name (`profile.invalid_name`, `profile.invalid`)", body = ProblemDoc),
        (status = 409, description = "`profile.revision_conflict`: the name is taken", body = ProblemDoc),
        (status = 422, description = "admission refused the definition (`admission.*`, diagnostics in `details`)", body = ProblemDoc),
    ),
)]
pub async fn create(State(state): State<ApiState>, body: Bytes) -> Result<Response, Problem> {
    let body: ProfileCreateBody = json_body(&body)?;
    let request = SaveProfile {
        name: body.name,
        definition: body.definition,
        expected: ExpectedRevision::New,
    };
    save(&state, request).await
}

/// One profile, whole.
#[utoipa::path(
    get, path = "/api/v1/profiles/{name}", tag = "profiles",
    params(("name" = String, Path, description = "profile name")),
    responses(
        (status = 200, body = ProfileDoc),
        (status = 400, body = ProblemDoc),
        (status = 404, body = ProblemDoc),
    ),
)]
pub async fn show(
    State(state): State<ApiState>,
    Path(name): Path<String>,
) -> Result<Response, Problem> {
    let runtime = state.runtime.clone();
    let profile = blocking(move || runtime.profile(&name)).await?;
    Ok(Json(profile).into_response())
}

/// Saves a profile under the path's name if its current revision is the one named.
#[utoipa::path(
    put, path = "/api/v1/profiles/{name}", tag = "profiles",
    params(("name" = String, Path, description = "profile name")),
    request_body = ProfileSaveBody,
    responses(
        (status = 200, description = "saved over the revision named", body = SavedProfileDoc),
        (status = 201, description = "a new profile", body = SavedProfileDoc),
        (status = 400, body = ProblemDoc),
        (status = 409, description = "`profile.revision_conflict`, `details` naming `currentRevision` and `expectedRevision`", body = ProblemDoc),
        (status = 422, description = "admission refused the definition", body = ProblemDoc),
    ),
)]
pub async fn replace(
    State(state): State<ApiState>,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Response, Problem> {
    let body: ProfileSaveBody = json_body(&body)?;
    let request = SaveProfile {
        name,
        definition: body.definition,
        expected: expected(body.revision, body.force),
    };
    save(&state, request).await
}

/// Deletes a profile if its current revision is the one named (or with `force=true`).
#[utoipa::path(
    delete, path = "/api/v1/profiles/{name}", tag = "profiles",
    params(("name" = String, Path, description = "profile name"), ProfileDeleteQuery),
    responses(
        (status = 200, body = DeletedProfileDoc),
        (status = 404, body = ProblemDoc),
        (status = 409, body = ProblemDoc),
    ),
)]
pub async fn delete(
    State(state): State<ApiState>,
    Path(name): Path<String>,
    Query(query): Query<ProfileDeleteQuery>,
) -> Result<Response, Problem> {
    let expected = expected(query.revision, query.force.unwrap_or(false));
    let runtime = state.runtime.clone();
    let deleted = blocking(move || runtime.delete_profile(&name, expected)).await?;
    Ok(Json(deleted).into_response())
}
