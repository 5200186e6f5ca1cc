//! The catalog: the tools airlock knows, as plain values. No global registry: callers build one
//! with [`Catalog::builtin`] (or their own list, in tests) and pass it where it is needed.

use crate::tool::Tool;
use crate::tools;

/// An ordered set of tools, unique by name.
pub struct Catalog {
    tools: Vec<Box<dyn Tool>>,
}

impl Catalog {
    /// Every tool airlock ships, sorted by name.
    pub fn builtin() -> Catalog {
        Catalog::new(tools::all())
    }

    /// A catalog of these tools, sorted by name.
    ///
    /// # Panics
    /// When two tools share a name: a programming error in the catalog, caught by its tests.
    pub fn new(mut tools: Vec<Box<dyn Tool>>) -> Catalog {
        tools.sort_by_key(|t| t.name());
        for pair in tools.windows(2) {
            assert_ne!(pair[0].name(), pair[1].name(), "duplicate tool in catalog");
        }
        Catalog { tools }
    }

    /// Only the tools named in `names` (e.g. a test's catalog of one built-in tool).
    pub fn retain(mut self, names: &[&str]) -> Catalog {
        self.tools.retain(|t| names.contains(&t.name()));
        self
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&dyn Tool> {
        self.tools
            .iter()
            .find(|t| t.name() == name)
            .map(|t| t.as_ref())
    }

    /// Every tool, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = &dyn Tool> {
        self.tools.iter().map(|t| t.as_ref())
    }

    /// Every tool name, sorted.
    pub fn names(&self) -> Vec<&'static str> {
        self.tools.iter().map(|t| t.name()).collect()
    }
}
