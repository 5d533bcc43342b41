//! Worker descriptors (what a worker promises), their validation, and worker outcomes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::artifact::{ArtifactRef, RedactionClass};
use crate::ident::{EnumLabel, EnumSet, FieldName, PolicyRef, StableRef, WorkerRef};
use crate::json::Json;
use crate::json::{At, JsonPath, Obj, ParseError, array_of, invalid_type, unknown_variant};
use crate::node::read_signals;
use crate::payload::PayloadType;
use crate::spec::GraphProfile;

/// The four ways a worker execution can fail, as graph control flow sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerErrorCode {
    Timeout,
    Crash,
    Malformed,
    Refusal,
}

impl WorkerErrorCode {
    /// The canonical order of the four codes.
    pub const ALL: [WorkerErrorCode; 4] =
        [Self::Timeout, Self::Crash, Self::Malformed, Self::Refusal];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::Crash => "crash",
            Self::Malformed => "malformed",
            Self::Refusal => "refusal",
        }
    }

    fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        match value.as_str() {
            Some("timeout") => Ok(Self::Timeout),
            Some("crash") => Ok(Self::Crash),
            Some("malformed") => Ok(Self::Malformed),
            Some("refusal") => Ok(Self::Refusal),
            Some(other) => Err(unknown_variant(
                other,
                &["timeout", "crash", "malformed", "refusal"],
                at,
            )),
            None => Err(invalid_type(value, "a worker error code", at)),
        }
    }
}

/// The transport a worker is reached through; only pinned triples are valid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkerBinding {
    pub protocol: String,
    pub version: String,
    pub profile: String,
}

const PINNED_BINDINGS: [(&str, &str, &str); 4] = [
    ("acp", "1", "openengine.worker.acp/v1"),
    ("a2a", "1.0", "openengine.worker.a2a/1.0"),
    ("legacy_zeroshot", "1", "legacy.zeroshot.ship/v1"),
    ("builtin", "1", "openengine.worker.builtin/v1"),
];

/// The reserved single-worker legacy worker.
pub const LEGACY_SHIP_WORKER: &str = "legacy.zeroshot.ship@1";

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifierContract {
    pub signals: BTreeMap<FieldName, EnumSet>,
    pub diagnostic: PayloadType,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkerContract {
    pub input: PayloadType,
    pub output: PayloadType,
    /// Serialized as `null` for plain workers.
    pub verifier: Option<VerifierContract>,
    pub errors: Vec<WorkerErrorCode>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CapabilityPolicy {
    pub autonomy: Autonomy,
    pub permission_policy: PolicyRef,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Autonomy {
    Strict,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactProfile {
    pub allowed_type_ids: Vec<StableRef>,
    pub allowed_media_types: Vec<String>,
    pub minimum_redaction: RedactionClass,
}

/// What a worker promises: identity, transport, typed contract, policy and credential needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerDescriptor {
    pub worker: WorkerRef,
    pub graph_profiles: Vec<GraphProfile>,
    pub binding: WorkerBinding,
    pub contract: WorkerContract,
    pub capability_policy: CapabilityPolicy,
    pub artifact_profile: ArtifactProfile,
    pub credential_requirements: Vec<StableRef>,
}

fn has_duplicates<T: Ord>(items: &[T]) -> bool {
    let set: BTreeSet<&T> = items.iter().collect();
    set.len() != items.len()
}

impl WorkerDescriptor {
    /// Parses and validates (`validate` failures are reported as parse errors at `at`).
    pub fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        let descriptor = Self::read_unvalidated(value, at)?;
        descriptor.validate().map_err(|m| ParseError::new(m, at))?;
        Ok(descriptor)
    }

    /// Reads the structure only (see [`WorkerDescriptor::parse_unvalidated`]).
    pub fn read_unvalidated(value: &Json, at: &At) -> Result<Self, ParseError> {
        let obj = Obj::closed(
            value,
            at,
            "WorkerDescriptor",
            &[
                "worker",
                "graphProfiles",
                "binding",
                "contract",
                "capabilityPolicy",
                "artifactProfile",
                "credentialRequirements",
            ],
        )?;
        let binding_at = obj.path("binding");
        let binding = Obj::closed(
            obj.required("binding")?,
            &binding_at,
            "WorkerBinding",
            &["protocol", "version", "profile"],
        )?;
        let contract_at = obj.path("contract");
        let contract = Obj::closed(
            obj.required("contract")?,
            &contract_at,
            "WorkerContract",
            &["input", "output", "verifier", "errors"],
        )?;
        let verifier = match contract.optional("verifier") {
            None => None,
            Some(v) => {
                let v_at = contract.path("verifier");
                let v = Obj::closed(v, &v_at, "VerifierContract", &["signals", "diagnostic"])?;
                Some(VerifierContract {
                    signals: read_signals(v.required("signals")?, &v.path("signals"))?,
                    diagnostic: PayloadType::read(
                        v.required("diagnostic")?,
                        &v.path("diagnostic"),
                    )?,
                })
            }
        };
        let policy_at = obj.path("capabilityPolicy");
        let policy = Obj::closed(
            obj.required("capabilityPolicy")?,
            &policy_at,
            "CapabilityPolicy",
            &["autonomy", "permissionPolicy"],
        )?;
        let autonomy = match policy.string("autonomy")? {
            "strict" => Autonomy::Strict,
            other => {
                return Err(unknown_variant(
                    other,
                    &["strict"],
                    &policy.path("autonomy"),
                ));
            }
        };
        let artifacts_at = obj.path("artifactProfile");
        let artifacts = Obj::closed(
            obj.required("artifactProfile")?,
            &artifacts_at,
            "ArtifactProfile",
            &["allowedTypeIds", "allowedMediaTypes", "minimumRedaction"],
        )?;
        let string_item = |v: &Json, at: &At| {
            v.as_str()
                .map(str::to_owned)
                .ok_or_else(|| invalid_type(v, "a string", at))
        };
        Ok(Self {
            worker: WorkerRef::read(obj.required("worker")?, &obj.path("worker"))?,
            graph_profiles: array_of(
                obj.required("graphProfiles")?,
                &obj.path("graphProfiles"),
                GraphProfile::read,
            )?,
            binding: WorkerBinding {
                protocol: binding.string("protocol")?.to_owned(),
                version: binding.string("version")?.to_owned(),
                profile: binding.string("profile")?.to_owned(),
            },
            contract: WorkerContract {
                input: PayloadType::read(contract.required("input")?, &contract.path("input"))?,
                output: PayloadType::read(contract.required("output")?, &contract.path("output"))?,
                verifier,
                errors: array_of(
                    contract.required("errors")?,
                    &contract.path("errors"),
                    WorkerErrorCode::read,
                )?,
            },
            capability_policy: CapabilityPolicy {
                autonomy,
                permission_policy: PolicyRef::read(
                    policy.required("permissionPolicy")?,
                    &policy.path("permissionPolicy"),
                )?,
            },
            artifact_profile: ArtifactProfile {
                allowed_type_ids: array_of(
                    artifacts.required("allowedTypeIds")?,
                    &artifacts.path("allowedTypeIds"),
                    StableRef::read,
                )?,
                allowed_media_types: array_of(
                    artifacts.required("allowedMediaTypes")?,
                    &artifacts.path("allowedMediaTypes"),
                    string_item,
                )?,
                minimum_redaction: RedactionClass::read(
                    artifacts.required("minimumRedaction")?,
                    &artifacts.path("minimumRedaction"),
                )?,
            },
            credential_requirements: array_of(
                obj.required("credentialRequirements")?,
                &obj.path("credentialRequirements"),
                StableRef::read,
            )?,
        })
    }

    /// The descriptor rules of the contract, checked in their specified order.
    pub fn validate(&self) -> Result<(), String> {
        let b = &self.binding;
        let pinned = PINNED_BINDINGS
            .iter()
            .any(|(p, v, f)| b.protocol == *p && b.version == *v && b.profile == *f);
        if !pinned {
            return Err("unsupported worker protocol version/profile binding".to_owned());
        }
        if self.graph_profiles.is_empty() {
            return Err("graph profiles must not be empty".to_owned());
        }
        if has_duplicates(&self.graph_profiles) {
            return Err("graph profiles must not contain duplicates".to_owned());
        }
        let errors = &self.contract.errors;
        if errors.is_empty() {
            return Err("worker errors must not be empty".to_owned());
        }
        if has_duplicates(errors) {
            return Err("worker errors must not contain duplicates".to_owned());
        }
        if errors.len() != WorkerErrorCode::ALL.len() {
            return Err(
                "worker errors must contain timeout, crash, malformed, and refusal".to_owned(),
            );
        }
        let profile = &self.artifact_profile;
        if profile.allowed_type_ids.is_empty() {
            return Err("artifact type IDs must not be empty".to_owned());
        }
        if has_duplicates(&profile.allowed_type_ids) {
            return Err("artifact type IDs must not contain duplicates".to_owned());
        }
        if profile.allowed_media_types.is_empty() {
            return Err("artifact media types must not be empty".to_owned());
        }
        if has_duplicates(&profile.allowed_media_types) {
            return Err("artifact media types must not contain duplicates".to_owned());
        }
        if has_duplicates(&self.credential_requirements) {
            return Err("credential handles must not contain duplicates".to_owned());
        }
        let is_legacy_protocol = b.protocol == "legacy_zeroshot";
        if (is_legacy_protocol || self.worker.as_str() == LEGACY_SHIP_WORKER)
            && !self.is_pinned_legacy()
        {
            return Err(format!(
                "{LEGACY_SHIP_WORKER} must use its pinned binding and {}",
                GraphProfile::SINGLE_WORKER
            ));
        }
        if b.protocol == "builtin" && !self.credential_requirements.is_empty() {
            return Err(
                "openengine.worker.builtin/v1 descriptors must not declare credential requirements"
                    .to_owned(),
            );
        }
        Ok(())
    }

    fn is_pinned_legacy(&self) -> bool {
        let (request, result) = legacy_payload_types();
        self.binding.protocol == "legacy_zeroshot"
            && self.worker.as_str() == LEGACY_SHIP_WORKER
            && self.graph_profiles == [GraphProfile::SingleWorker]
            && self.contract.input == *request
            && self.contract.output == *result
            && self.contract.verifier.is_none()
            && self.contract.errors == WorkerErrorCode::ALL
    }

    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

crate::json::wire_entry_points!(WorkerDescriptor);

impl WorkerDescriptor {
    /// Parses the structure only; registries keep descriptors like this and validate on use.
    pub fn parse_unvalidated(value: &Value, at: &JsonPath) -> Result<Self, ParseError> {
        let arena = crate::json::Arena::new();
        Self::read_unvalidated(&Json::from_value(value, &arena), &At::Base(at))
    }
}

/// The canonical request and result payload types of the legacy ship worker.
fn legacy_payload_types() -> &'static (PayloadType, PayloadType) {
    static TYPES: OnceLock<(PayloadType, PayloadType)> = OnceLock::new();
    TYPES.get_or_init(|| {
        let s = || json!({"type": {"kind": "string"}, "required": true});
        let opt_s = || json!({"type": {"kind": "string"}, "required": false});
        let int = || json!({"type": {"kind": "integer"}, "required": true});
        let art = json!({"kind": "record", "fields": {
            "artifactId": s(), "sha256": s(), "mediaType": s(), "typeId": s(), "byteLength": int(),
            "producer": {"required": true, "type": {"kind": "record", "fields": {"node": s(), "worker": s()}}},
            "lineage": {"required": true, "type": {"kind": "record", "fields": {
                "generation": int(), "runId": s(), "attempt": int()}}},
            "redaction": {"required": true, "type": {"kind": "enum",
                "values": ["confidential", "internal", "public", "restricted"]}}
        }});
        let artifacts = json!({"required": true, "type": {"kind": "array", "items": art}});
        let request = json!({"kind": "record", "fields": {
            "source": {"required": true, "type": {"kind": "enum", "values": ["artifact", "issue", "prompt"]}},
            "issue": opt_s(), "prompt": opt_s(), "artifacts": artifacts.clone(),
            "isolationProfile": s(), "providerProfile": s(), "repository": s(), "provider": s(),
            "modelLevel": {"required": true, "type": {"kind": "enum", "values": ["level1", "level2", "level3"]}}
        }});
        let result = json!({"kind": "record", "fields": {
            "summary": s(),
            "status": {"required": true, "type": {"kind": "enum", "values": ["failed", "succeeded"]}},
            "artifacts": artifacts,
            "repository": opt_s(), "branch": opt_s(), "headRevision": opt_s(), "pullRequestUrl": opt_s()
        }});
        let parse = |v: &Value| {
            let arena = crate::json::Arena::new();
            PayloadType::read(&Json::from_value(v, &arena), &At::Base(&JsonPath::root()))
                .unwrap_or(PayloadType::Null)
        };
        (parse(&request), parse(&result))
    })
}

/// Why an execution failed, beyond its error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureReason {
    DeclaredFailure,
    PolicyDenied,
    InteractiveInputRequired,
    AuthenticationRequired,
    MalformedResult,
}

impl FailureReason {
    fn is_consistent_with(self, code: WorkerErrorCode) -> bool {
        match self {
            Self::DeclaredFailure => true,
            Self::PolicyDenied | Self::InteractiveInputRequired | Self::AuthenticationRequired => {
                code == WorkerErrorCode::Refusal
            }
            Self::MalformedResult => code == WorkerErrorCode::Malformed,
        }
    }
}

/// The settled result of one worker execution.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum WorkerOutcome {
    Verified {
        output: Value,
        artifacts: Vec<ArtifactRef>,
    },
    Verifier {
        output: Value,
        signals: BTreeMap<FieldName, EnumLabel>,
        diagnostic: Value,
        artifacts: Vec<ArtifactRef>,
    },
    Error {
        code: WorkerErrorCode,
        reason: FailureReason,
    },
}

const INCONSISTENT_PAIR: &str = "worker error code and failure reason are inconsistent";

impl WorkerOutcome {
    /// An error outcome, refusing inconsistent (code, reason) pairs.
    pub fn error(code: WorkerErrorCode, reason: FailureReason) -> Result<Self, String> {
        if reason.is_consistent_with(code) {
            Ok(Self::Error { code, reason })
        } else {
            Err(INCONSISTENT_PAIR.to_owned())
        }
    }

    /// A plain `declared_failure` error with the given code.
    pub fn failure(code: WorkerErrorCode) -> Self {
        Self::Error {
            code,
            reason: FailureReason::DeclaredFailure,
        }
    }

    pub fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        let obj = crate::json::tagged(value, at, "WorkerOutcome")?;
        let artifacts = |obj: &Obj| {
            array_of(
                obj.required("artifacts")?,
                &obj.path("artifacts"),
                ArtifactRef::read,
            )
        };
        match obj.tag("status", "WorkerOutcome")? {
            "verified" => {
                crate::selector::variant(&obj, "status", &["output", "artifacts"])?;
                Ok(Self::Verified {
                    output: obj.required("output")?.to_value(),
                    artifacts: artifacts(&obj)?,
                })
            }
            "verifier" => {
                crate::selector::variant(
                    &obj,
                    "status",
                    &["output", "signals", "diagnostic", "artifacts"],
                )?;
                let signals_at = obj.path("signals");
                let mut signals = BTreeMap::new();
                for (key, label) in obj.object("signals")? {
                    let key_at = signals_at.key(key);
                    let field = FieldName::new(key).map_err(|m| ParseError::new(m, &key_at))?;
                    signals.insert(field, EnumLabel::read(label, &key_at)?);
                }
                Ok(Self::Verifier {
                    output: obj.required("output")?.to_value(),
                    signals,
                    diagnostic: obj.required("diagnostic")?.to_value(),
                    artifacts: artifacts(&obj)?,
                })
            }
            "error" => {
                crate::selector::variant(&obj, "status", &["code", "reason"])?;
                let code = WorkerErrorCode::read(obj.required("code")?, &obj.path("code"))?;
                let reason: FailureReason =
                    serde_json::from_value(obj.required("reason")?.to_value())
                        .map_err(|e| ParseError::new(e.to_string(), &obj.path("reason")))?;
                Self::error(code, reason).map_err(|m| ParseError::new(m, at))
            }
            other => Err(unknown_variant(
                other,
                &["verified", "verifier", "error"],
                &obj.path("status"),
            )),
        }
    }

    /// The error code, when this outcome is an error.
    pub fn error_code(&self) -> Option<WorkerErrorCode> {
        match self {
            Self::Error { code, .. } => Some(*code),
            _ => None,
        }
    }
}

crate::json::wire_entry_points!(WorkerOutcome);
