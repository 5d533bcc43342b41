//! GraphSpec openengine.graph.full/v1 wire types: closed parsing with exact limits, the PayloadType algebra, subtyping, value checking, worker descriptors and the registry port.
