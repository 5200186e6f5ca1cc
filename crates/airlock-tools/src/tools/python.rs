//! Python: nothing of the host's is needed; `pip install --user` lands in the sandbox home and
//! virtual environments belong in the project.

use crate::tool::Tool;

pub(crate) struct Python;

impl Tool for Python {
    fn name(&self) -> &'static str {
        "python"
    }
    fn description(&self) -> &'static str {
        "Python (user installs in the sandbox home, venvs in the project)"
    }
    fn binaries(&self) -> &'static [&'static str] {
        &["python3", "python"]
    }
    fn has_mount_mode(&self) -> bool {
        false
    }
}
