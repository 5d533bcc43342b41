//! RuntimePlan admission, the run supervisor and detached controller, workspace locks, force-stop, recovery, resume, built-in templates and git delivery.
