//! The forge calls every delivery makes the same way: the client from the binding's token
//! variable, the input's text fields, and a forge error (after retries) as a delivery failure.

use serde_json::Value;
use trellis_agents::{DeliveryBinding, ExecutionRequest};
use trellis_forge::{ForgeError, GitHub};
use trellis_graph::WorkerErrorCode;

use super::git::DeliveryFailure;
use super::kind::token_variable;
use super::retry::{RetrySchedule, retrying};
use super::settings::ForgeSettings;

pub(super) fn forge_failure(error: ForgeError) -> DeliveryFailure {
    let code = if error.is_transient() {
        WorkerErrorCode::Crash
    } else {
        WorkerErrorCode::Refusal
    };
    DeliveryFailure {
        code,
        message: format!("{} [{}]", error, error.code()),
    }
}

/// One forge operation, tried again through transient failures (see `retry`); the failure
/// says how often it was tried.
pub(super) async fn tried<T, F, Fut>(
    schedule: &RetrySchedule,
    what: &str,
    log: &(dyn Fn(String) + Sync),
    operation: F,
) -> Result<T, DeliveryFailure>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ForgeError>>,
{
    retrying(schedule, what, log, operation)
        .await
        .map_err(|gave_up| {
            let mut failure = forge_failure(gave_up.error);
            if gave_up.tries > 1 {
                failure
                    .message
                    .push_str(&format!(" (gave up after {} tries)", gave_up.tries));
            }
            failure
        })
}

pub(super) fn refusal(message: String) -> DeliveryFailure {
    DeliveryFailure {
        code: WorkerErrorCode::Refusal,
        message,
    }
}

pub(super) fn connect(
    forge: &ForgeSettings,
    host: &str,
    binding: &DeliveryBinding,
    request: &ExecutionRequest,
) -> Result<GitHub, DeliveryFailure> {
    forge
        .client(host, &token_variable(binding), |name| {
            request.environment.get(name).map(str::to_owned)
        })
        .map_err(forge_failure)
}

pub(super) fn input_text<'a>(request: &'a ExecutionRequest, field: &str) -> Option<&'a str> {
    request.input.get(field).and_then(Value::as_str)
}
