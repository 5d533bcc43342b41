//! The run API's answers as OpenAPI component schemas (`RunStatusDoc`, `ProblemDoc`, …): the
//! runtime serializes its views itself, so each schema is declared here field by field, below
//! both the routes that name them in their annotations and the document that collects them.

use std::borrow::Cow;

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Ref, Schema, Type};
use utoipa::{PartialSchema, ToSchema};

/// The shape of one field of a documented answer.
#[derive(Clone, Copy)]
enum Field {
    Text,
    Integer,
    Boolean,
    /// A JSON object whose fields are described in `docs/run-api.md`.
    Object,
    /// Any JSON value (documents, inputs, outputs).
    Any,
    Integers,
    Texts,
    OneOf(&'static [&'static str]),
    Component(&'static str),
    Components(&'static str),
}

fn field_schema(field: Field) -> RefOr<Schema> {
    match field {
        Field::Text => ObjectBuilder::new().schema_type(Type::String).into(),
        Field::Integer => ObjectBuilder::new()
            .schema_type(Type::Integer)
            .minimum(Some(0))
            .into(),
        Field::Boolean => ObjectBuilder::new().schema_type(Type::Boolean).into(),
        Field::Object => ObjectBuilder::new().schema_type(Type::Object).into(),
        Field::Any => ObjectBuilder::new().into(),
        Field::Integers => ArrayBuilder::new()
            .items(ObjectBuilder::new().schema_type(Type::Integer))
            .into(),
        Field::Texts => ArrayBuilder::new()
            .items(ObjectBuilder::new().schema_type(Type::String))
            .into(),
        Field::OneOf(values) => ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(values.iter().copied()))
            .into(),
        Field::Component(name) => Ref::from_schema_name(name).into(),
        Field::Components(name) => ArrayBuilder::new()
            .items(Ref::from_schema_name(name))
            .into(),
    }
}

/// An object schema from `(name, shape, required)` rows.
fn object(description: &str, fields: &[&[(&str, Field, bool)]]) -> RefOr<Schema> {
    let mut builder = ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(description));
    for (name, field, required) in fields.iter().flat_map(|rows| rows.iter()) {
        builder = builder.property(*name, field_schema(*field));
        if *required {
            builder = builder.required(*name);
        }
    }
    builder.into()
}

const RUN_KINDS: &[&str] = &["graphspec", "gap"];

const SUMMARY_FIELDS: &[(&str, Field, bool)] = &[
    ("runId", Field::Text, true),
    ("title", Field::Text, true),
    ("kind", Field::OneOf(RUN_KINDS), true),
    ("template", Field::Text, false),
    ("graphIdentity", Field::Text, false),
    ("atCursor", Field::Text, true),
    ("status", Field::Component("PhaseStatus"), true),
    ("createdAtMs", Field::Integer, true),
    ("startedAtMs", Field::Integer, false),
    ("finishedAtMs", Field::Integer, false),
    ("tokenUsage", Field::Component("TokenUsage"), true),
    ("predecessor", Field::Text, false),
    ("successor", Field::Text, false),
];

const STATUS_FIELDS: &[(&str, Field, bool)] = &[
    ("forceStopRequested", Field::Boolean, true),
    ("executionsStarted", Field::Integer, true),
    ("controller", Field::Object, false),
    ("executions", Field::Components("ExecutionSummary"), true),
    // Why a failed run failed: `{reason, nodes: [{node, channel, reason, message, …}]}`.
    ("cause", Field::Object, false),
    // Where a finished GaP run ended: `{exitStatus, endNode, failedNode}`.
    ("gapEnd", Field::Object, false),
];

const EXECUTION_FIELDS: &[(&str, Field, bool)] = &[
    ("id", Field::Integer, true),
    ("reference", Field::Text, true),
    ("node", Field::Text, true),
    ("mapIndices", Field::Integers, true),
    ("attempt", Field::Integer, true),
    ("worker", Field::Text, true),
    (
        "phase",
        Field::OneOf(&["active", "completed", "voided"]),
        true,
    ),
    ("outcome", Field::Object, false),
    ("startedAtMs", Field::Integer, true),
    ("endedAtMs", Field::Integer, false),
    ("tokenUsage", Field::Component("TokenUsage"), false),
    ("reusedFrom", Field::Text, false),
    ("settledBy", Field::Text, false),
    ("voidReason", Field::Text, false),
];

const DETAIL_FIELDS: &[(&str, Field, bool)] = &[
    ("nodeInstance", Field::Integer, true),
    ("input", Field::Any, true),
    ("result", Field::Object, false),
    ("binding", Field::Object, false),
    ("siblings", Field::Integers, true),
];

const TOKEN_FIELDS: &[(&str, Field, bool)] = &[
    ("inputTokens", Field::Integer, true),
    ("outputTokens", Field::Integer, true),
    ("cacheReadTokens", Field::Integer, true),
    ("cacheWriteTokens", Field::Integer, true),
    ("costUsd", Field::Any, false),
];

const PHASE_FIELDS: &[(&str, Field, bool)] = &[
    (
        "phase",
        Field::OneOf(&["admitted", "running", "stopping", "finished"]),
        true,
    ),
    ("activeExecutions", Field::Object, false),
    ("terminalResult", Field::Object, false),
];

const WATCH_PHASE_FIELDS: &[(&str, Field, bool)] = &[
    (
        "phase",
        Field::OneOf(&["admitted", "running", "stopping", "finished"]),
        true,
    ),
    ("terminalResult", Field::Object, false),
];

const WATCH_COUNT_FIELDS: &[(&str, Field, bool)] = &[
    ("active", Field::Integer, true),
    ("settled", Field::Integer, true),
];

const GRAPH_FIELDS: &[(&str, Field, bool)] = &[
    ("runId", Field::Text, true),
    ("kind", Field::OneOf(RUN_KINDS), true),
    ("graph", Field::Any, true),
    ("input", Field::Any, false),
    ("identity", Field::Text, false),
    ("bounds", Field::Object, false),
    ("layout", Field::Object, false),
];

const GAP_BODY_FIELDS: &[(&str, Field, bool)] = &[
    ("node", Field::Text, true),
    ("visit", Field::Integer, true),
    ("nodeType", Field::Text, true),
    (
        "phase",
        Field::OneOf(&["running", "succeeded", "failed", "cancelled"]),
        true,
    ),
    ("startedAtMs", Field::Integer, true),
    ("startedCursor", Field::Text, true),
    ("endedAtMs", Field::Integer, false),
    ("settledCursor", Field::Text, false),
    ("output", Field::Any, false),
    ("omittedBytes", Field::Integer, false),
    ("error", Field::Text, false),
    ("reusedFrom", Field::Text, false),
];

const WATCH_FIELDS: &[(&str, Field, bool)] = &[
    ("runId", Field::Text, true),
    ("title", Field::Text, true),
    ("cursor", Field::Text, true),
    ("event", Field::Text, true),
    ("atMs", Field::Integer, true),
    ("status", Field::Component("WatchStatus"), true),
    ("counts", Field::Component("WatchCounts"), true),
    ("execution", Field::Component("ExecutionSummary"), false),
];

const LOG_FIELDS: &[(&str, Field, bool)] = &[
    ("runId", Field::Text, true),
    ("cursor", Field::Text, true),
    ("execution", Field::Text, false),
    ("executionId", Field::Integer, false),
    ("node", Field::Text, false),
    ("stream", Field::OneOf(&["output", "error", "system"]), true),
    ("record", Field::Object, true),
    ("atMs", Field::Integer, true),
];

const CHECKPOINT_PAGE_FIELDS: &[(&str, Field, bool)] = &[
    ("runId", Field::Text, true),
    ("checkpoints", Field::Components("CheckpointInfo"), true),
    ("nextAfter", Field::Integer, false),
];

const CHECKPOINT_FIELDS: &[(&str, Field, bool)] = &[
    ("id", Field::Integer, true),
    // `{kind: "node" | "group", name}`: what the checkpoint was taken before.
    ("before", Field::Object, true),
    ("takenAtMs", Field::Integer, true),
    ("filesChanged", Field::Integer, true),
    ("bytesChanged", Field::Integer, true),
    ("commit", Field::Text, true),
    ("tree", Field::Text, true),
    ("reference", Field::Text, true),
    ("nextExecution", Field::Integer, true),
    // Whether its reference is still there (`trellis prune` and a succeeded chain delete them).
    ("kept", Field::Boolean, true),
];

const DISCARDED_FIELDS: &[(&str, Field, bool)] = &[
    ("runId", Field::Text, true),
    ("path", Field::Text, true),
    ("removed", Field::Boolean, true),
];

const SKIPPED_FIELDS: &[(&str, Field, bool)] =
    &[("run", Field::Text, true), ("reason", Field::Text, true)];

const PRUNE_REPORT_FIELDS: &[(&str, Field, bool)] = &[
    ("dryRun", Field::Boolean, true),
    ("olderThanMs", Field::Integer, true),
    ("pruned", Field::Components("PrunedItem"), true),
    ("liveRunsSkipped", Field::Texts, true),
];

const PRUNED_ITEM_FIELDS: &[(&str, Field, bool)] = &[
    (
        "kind",
        Field::OneOf(&["checkpoints", "saved", "worktree", "copies", "remote"]),
        true,
    ),
    ("runId", Field::Text, true),
    ("path", Field::Text, true),
    ("references", Field::Texts, true),
    (
        "reason",
        Field::OneOf(&["superseded", "olderThan", "ended"]),
        true,
    ),
];

const PROFILE_DEFINITION_FIELDS: &[(&str, Field, bool)] = &[
    // Exactly one of `graph` (a GraphSpec document) and `template`.
    ("graph", Field::Any, false),
    // `{name, delivery?, ignorePrFeedback?}`.
    ("template", Field::Object, false),
    ("taskDefault", Field::Text, false),
    ("input", Field::Any, false),
    // `{"exact": PLAN}` or `{"uniform": BINDING}`; none: the agent CLI found when it runs.
    ("plan", Field::Object, false),
    ("description", Field::Text, false),
];

const PROFILE_FIELDS: &[(&str, Field, bool)] = &[
    ("format", Field::OneOf(&["trellis.profile/v1"]), true),
    ("name", Field::Text, true),
    ("revision", Field::Integer, true),
    ("savedAtMs", Field::Integer, true),
    ("identity", Field::Text, true),
    ("definition", Field::Component("ProfileDefinition"), true),
];

const PROFILE_SUMMARY_FIELDS: &[(&str, Field, bool)] = &[
    ("name", Field::Text, true),
    ("revision", Field::Integer, true),
    ("savedAtMs", Field::Integer, true),
    ("identity", Field::Text, true),
    ("template", Field::Text, false),
    ("description", Field::Text, false),
];

const PROFILE_LISTING_FIELDS: &[(&str, Field, bool)] = &[
    ("profiles", Field::Components("ProfileSummary"), true),
    // `[{name, reason}]`: profile files that cannot be read.
    ("unreadable", Field::Any, false),
];

const SAVED_PROFILE_FIELDS: &[(&str, Field, bool)] = &[
    ("name", Field::Text, true),
    ("revision", Field::Integer, true),
    ("previousRevision", Field::Integer, false),
    ("identity", Field::Text, true),
    // The `run --validate-only` report of the saved definition.
    ("admission", Field::Object, true),
    ("notices", Field::Texts, false),
];

const DELETED_PROFILE_FIELDS: &[(&str, Field, bool)] = &[
    ("name", Field::Text, true),
    ("revision", Field::Integer, true),
];

const PROBLEM_FIELDS: &[(&str, Field, bool)] = &[
    ("code", Field::Text, true),
    ("message", Field::Text, true),
    ("details", Field::Object, false),
];

/// Declares a documented answer type: a named component built from field rows.
macro_rules! documented {
    ($type:ident, $name:literal, $description:literal, [$($rows:expr),+]) => {
        #[doc = $description]
        pub struct $type;

        impl PartialSchema for $type {
            fn schema() -> RefOr<Schema> {
                object($description, &[$($rows),+])
            }
        }

        impl ToSchema for $type {
            fn name() -> Cow<'static, str> {
                Cow::Borrowed($name)
            }
        }
    };
}

documented!(
    RunSummaryDoc,
    "RunSummary",
    "One run as a list shows it.",
    [SUMMARY_FIELDS]
);
documented!(
    RunStatusDoc,
    "RunStatus",
    "One run in full: its summary plus every execution.",
    [SUMMARY_FIELDS, STATUS_FIELDS]
);
documented!(
    ExecutionSummaryDoc,
    "ExecutionSummary",
    "One execution of a node, without its payloads.",
    [EXECUTION_FIELDS]
);
documented!(
    ExecutionDetailDoc,
    "ExecutionDetail",
    "One execution in full: input, outcome and binding (variable names, never values).",
    [EXECUTION_FIELDS, DETAIL_FIELDS]
);
documented!(
    TokenUsageDoc,
    "TokenUsage",
    "Tokens a run or execution used.",
    [TOKEN_FIELDS]
);
documented!(
    PhaseStatusDoc,
    "PhaseStatus",
    "Where a run is: its phase, active executions while running, the result once finished.",
    [PHASE_FIELDS]
);
documented!(
    WatchStatusDoc,
    "WatchStatus",
    "A run's phase in a watch update, with the result once finished (no execution list).",
    [WATCH_PHASE_FIELDS]
);
documented!(
    WatchCountsDoc,
    "WatchCounts",
    "How many executions are running and how many have settled, as of a watch update.",
    [WATCH_COUNT_FIELDS]
);
documented!(
    RunGraphDoc,
    "RunGraph",
    "A run's graph document with identity, bounds and layout.",
    [GRAPH_FIELDS]
);
documented!(
    GapBodyDoc,
    "GapBody",
    "One visit of a GaP run's tool, script or router body, as its ledger recorded it.",
    [GAP_BODY_FIELDS]
);
documented!(
    WatchUpdateDoc,
    "WatchUpdate",
    "The data of a `watch` stream's `update` event.",
    [WATCH_FIELDS]
);
documented!(
    LogEntryDoc,
    "LogEntry",
    "The data of a `logs` stream's `log` event.",
    [LOG_FIELDS]
);
documented!(
    CheckpointPageDoc,
    "CheckpointPage",
    "One page of a run's checkpoints, oldest first; `nextAfter` asks for the next.",
    [CHECKPOINT_PAGE_FIELDS]
);
documented!(
    CheckpointInfoDoc,
    "CheckpointInfo",
    "One checkpoint: a commit of the workspace in a private ref, and the executions settled before it.",
    [CHECKPOINT_FIELDS]
);
documented!(
    SkippedRunDoc,
    "SkippedRun",
    "A run left out of a listing because its stored rows cannot be read, and why.",
    [SKIPPED_FIELDS]
);
documented!(
    DiscardedWorkspaceDoc,
    "DiscardedWorkspace",
    "The worktree a run kept, and whether it was removed now.",
    [DISCARDED_FIELDS]
);
documented!(
    PruneReportDoc,
    "PruneReport",
    "What a prune removed (or, in a dry run, would remove), and the runs left alone because they or a successor are still going.",
    [PRUNE_REPORT_FIELDS]
);
documented!(
    PrunedItemDoc,
    "PrunedItem",
    "One thing pruned: a run's checkpoint references, a saved workspace state, or a failed run's worktree.",
    [PRUNED_ITEM_FIELDS]
);
documented!(
    ProblemDoc,
    "Problem",
    "Every error answer: a stable `code`, a message for people, optional details.",
    [PROBLEM_FIELDS]
);
documented!(
    ProfileDefinitionDoc,
    "ProfileDefinition",
    "A saved run definition: a graph or a template (with its task default), a runtime plan, a default input, a description.",
    [PROFILE_DEFINITION_FIELDS]
);
documented!(
    ProfileDoc,
    "Profile",
    "A stored profile: its revision, the graph identity it was admitted as, and its definition (the document `trellis profile export` writes).",
    [PROFILE_FIELDS]
);
documented!(
    ProfileSummaryDoc,
    "ProfileSummary",
    "One profile as the list shows it.",
    [PROFILE_SUMMARY_FIELDS]
);
documented!(
    ProfileListingDoc,
    "ProfileListing",
    "Every profile of the server, by name, and the files that cannot be read.",
    [PROFILE_LISTING_FIELDS]
);
documented!(
    SavedProfileDoc,
    "SavedProfile",
    "A profile saved: its new revision, the one it replaced, and what admission said of it.",
    [SAVED_PROFILE_FIELDS]
);
documented!(
    DeletedProfileDoc,
    "DeletedProfile",
    "A profile deleted, and the revision it had.",
    [DELETED_PROFILE_FIELDS]
);
