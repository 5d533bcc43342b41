//! The registry of type names a subgraph may declare for its inputs.

/// Type names accepted in subgraph `inputs` declarations (besides `*ObservationStream`).
pub const TYPE_NAMES: &[&str] = &[
    "Vec3",
    "Quaternion",
    "Se3Pose",
    "Pose",
    "OrientedBoundingBox",
    "BoundingBox2D",
    "CameraFrame",
    "CameraObservation",
    "Mask",
    "PointCloud",
    "JointState",
    "Trajectory",
    "GripperState",
    "ArmState",
    "Observation",
    "ObservationResponse",
    "CollisionMesh",
    "WorldConfig",
    "GraspCandidates",
    "FunctionalFeature",
    "CollisionSphere",
    "AttachedObject",
    "PoseWaypoint",
    "PoseSequence",
    "Centerline",
    "str",
    "string",
    "int",
    "float",
    "bool",
];

/// True when `name` is a registered type name.
pub fn is_known_type(name: &str) -> bool {
    TYPE_NAMES.contains(&name)
}

/// Registered names, sorted (as the reference lists them in its error).
pub fn known_type_names() -> Vec<&'static str> {
    let mut names = TYPE_NAMES.to_vec();
    names.sort_unstable();
    names
}
