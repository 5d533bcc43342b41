//! GaP workflow.json v3: loader, structural validator, super-step executor, Python bridge and trace writer.
