//! ArtifactRef: a content-addressed receipt for a produced artifact; never bytes, paths or URLs.

use serde::Serialize;

use crate::ident::{NodeName, PositiveInteger, StableRef, WorkerRef};
use crate::json::Json;
use crate::json::{At, Obj, ParseError, invalid_type, unknown_variant};
use crate::limits::{MAX_ARTIFACT_VALUE_CHARS, MAX_SAFE_INTEGER};

/// How widely an artifact may be shared, ranked from least to most restricted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RedactionClass {
    Public,
    Internal,
    Confidential,
    Restricted,
}

impl RedactionClass {
    pub fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        const NAMES: [&str; 4] = ["public", "internal", "confidential", "restricted"];
        match value.as_str() {
            Some("public") => Ok(Self::Public),
            Some("internal") => Ok(Self::Internal),
            Some("confidential") => Ok(Self::Confidential),
            Some("restricted") => Ok(Self::Restricted),
            Some(other) => Err(unknown_variant(other, &NAMES, at)),
            None => Err(invalid_type(value, "a redaction class", at)),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArtifactProducer {
    pub node: NodeName,
    pub worker: WorkerRef,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactLineage {
    pub generation: u64,
    pub run_id: String,
    pub attempt: PositiveInteger,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactRef {
    pub artifact_id: String,
    pub sha256: String,
    pub byte_length: u64,
    pub media_type: String,
    pub type_id: StableRef,
    pub producer: ArtifactProducer,
    pub lineage: ArtifactLineage,
    pub redaction: RedactionClass,
}

fn bounded_text(value: &Json, at: &At) -> Result<String, ParseError> {
    let text = value
        .as_str()
        .ok_or_else(|| invalid_type(value, "a string", at))?;
    let chars = text.chars().count();
    if chars == 0 || chars > MAX_ARTIFACT_VALUE_CHARS || text.chars().any(char::is_control) {
        return Err(ParseError::new(
            format!("value must be at most {MAX_ARTIFACT_VALUE_CHARS} non-control characters"),
            at,
        ));
    }
    Ok(text.to_owned())
}

fn safe_u64(value: &Json, at: &At) -> Result<u64, ParseError> {
    match value.as_u64() {
        Some(n) if n <= MAX_SAFE_INTEGER => Ok(n),
        Some(_) => Err(ParseError::new(
            "integer is outside the JavaScript-safe range",
            at,
        )),
        None => Err(invalid_type(value, "a non-negative integer", at)),
    }
}

impl ArtifactRef {
    pub fn read(value: &Json, at: &At) -> Result<Self, ParseError> {
        let obj = Obj::closed(
            value,
            at,
            "ArtifactRef",
            &[
                "artifactId",
                "sha256",
                "byteLength",
                "mediaType",
                "typeId",
                "producer",
                "lineage",
                "redaction",
            ],
        )?;
        let sha = obj.string("sha256")?;
        if sha.len() != 64
            || !sha
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(ParseError::new(
                "sha256 must be 64 lowercase hexadecimal characters",
                &obj.path("sha256"),
            ));
        }
        let producer_at = obj.path("producer");
        let producer = Obj::closed(
            obj.required("producer")?,
            &producer_at,
            "ArtifactProducer",
            &["node", "worker"],
        )?;
        let lineage_at = obj.path("lineage");
        let lineage = Obj::closed(
            obj.required("lineage")?,
            &lineage_at,
            "ArtifactLineage",
            &["generation", "runId", "attempt"],
        )?;
        Ok(Self {
            artifact_id: bounded_text(obj.required("artifactId")?, &obj.path("artifactId"))?,
            sha256: sha.to_owned(),
            byte_length: safe_u64(obj.required("byteLength")?, &obj.path("byteLength"))?,
            media_type: bounded_text(obj.required("mediaType")?, &obj.path("mediaType"))?,
            type_id: StableRef::read(obj.required("typeId")?, &obj.path("typeId"))?,
            producer: ArtifactProducer {
                node: NodeName::read(producer.required("node")?, &producer.path("node"))?,
                worker: WorkerRef::read(producer.required("worker")?, &producer.path("worker"))?,
            },
            lineage: ArtifactLineage {
                generation: safe_u64(lineage.required("generation")?, &lineage.path("generation"))?,
                run_id: lineage.string("runId")?.to_owned(),
                attempt: PositiveInteger::read(
                    lineage.required("attempt")?,
                    &lineage.path("attempt"),
                )?,
            },
            redaction: RedactionClass::read(obj.required("redaction")?, &obj.path("redaction"))?,
        })
    }
}

crate::json::wire_entry_points!(ArtifactRef);

crate::json::value_entry_point!(RedactionClass);
