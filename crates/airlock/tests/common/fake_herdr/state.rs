//! The session model: workspaces holding tabs holding panes (with what an agent reported in
//! them), and the linked plugins. Ids are made the way herdr makes them: `w<n>`, `w<n>:t<m>`,
//! `w<n>:p<k>`, tab and pane numbers counted per workspace and never reused.

use std::path::Path;

use serde_json::{Map, Value};

use super::answers::{
    Failure, agent_not_found, pane_not_found, plugin_not_found, tab_not_found, workspace_not_found,
};
use super::{SCREEN_TEXT, START_CWD};

/// (workspace, tab, pane) indexes.
pub(super) type At = (usize, usize, usize);
/// (workspace, tab) indexes.
pub(super) type TabAt = (usize, usize);

pub(super) struct Session {
    pub(super) workspaces: Vec<Workspace>,
    /// The active workspace's id.
    pub(super) active: String,
    next_workspace: u64,
    next_terminal: u64,
    pub(super) plugins: Vec<Plugin>,
    pub(super) agent_view: Option<Value>,
    pub(super) graphics_sequence: u64,
}

pub(super) struct Workspace {
    pub(super) id: String,
    pub(super) number: u64,
    pub(super) label: String,
    pub(super) tabs: Vec<Tab>,
    pub(super) active_tab: String,
    next_tab: u64,
    next_pane: u64,
    pub(super) tokens: Map<String, Value>,
}

pub(super) struct Tab {
    pub(super) id: String,
    pub(super) number: u64,
    pub(super) label: String,
    pub(super) panes: Vec<Pane>,
    pub(super) focused: String,
    pub(super) zoomed: bool,
}

pub(super) struct Pane {
    pub(super) id: String,
    pub(super) terminal_id: String,
    pub(super) label: Option<String>,
    pub(super) cwd: Option<String>,
    pub(super) title: Option<String>,
    pub(super) text: String,
    pub(super) revision: u64,
    pub(super) agent: Option<String>,
    pub(super) name: Option<String>,
    pub(super) status: String,
    pub(super) state_change_seq: u64,
    pub(super) session: Option<Value>,
}

pub(super) struct Plugin {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) version: String,
    pub(super) min_herdr_version: String,
    pub(super) description: Option<String>,
    pub(super) root: String,
    pub(super) manifest: String,
    pub(super) enabled: bool,
}

impl Default for Session {
    /// `w1` with tab `w1:t1` holding `w1:p1` and the focused `w1:p2`.
    fn default() -> Session {
        let mut s = Session {
            workspaces: Vec::new(),
            active: String::new(),
            next_workspace: 1,
            next_terminal: 1,
            plugins: Vec::new(),
            agent_view: None,
            graphics_sequence: 0,
        };
        let w = s.new_workspace(Some("main"), Some(START_CWD.into()), true);
        s.split((w, 0, 0), Some(START_CWD.into()), true);
        s
    }
}

impl Session {
    fn new_pane(&mut self, w: usize, cwd: Option<String>) -> Pane {
        let ws = &mut self.workspaces[w];
        let id = format!("{}:p{}", ws.id, ws.next_pane);
        ws.next_pane += 1;
        let terminal_id = format!("term-{}", self.next_terminal);
        self.next_terminal += 1;
        Pane {
            id,
            terminal_id,
            label: None,
            cwd,
            title: None,
            text: SCREEN_TEXT.to_owned(),
            revision: 1,
            agent: None,
            name: None,
            status: "unknown".into(),
            state_change_seq: 0,
            session: None,
        }
    }

    pub(super) fn new_workspace(
        &mut self,
        label: Option<&str>,
        cwd: Option<String>,
        focus: bool,
    ) -> usize {
        let number = self.next_workspace;
        self.next_workspace += 1;
        let id = format!("w{number}");
        let label = label.map(str::to_owned).unwrap_or_else(|| {
            cwd.as_deref()
                .and_then(|c| Path::new(c).file_name())
                .and_then(|n| n.to_str())
                .map(str::to_owned)
                .unwrap_or_else(|| format!("workspace {number}"))
        });
        self.workspaces.push(Workspace {
            id: id.clone(),
            number,
            label,
            tabs: Vec::new(),
            active_tab: String::new(),
            next_tab: 1,
            next_pane: 1,
            tokens: Map::new(),
        });
        let w = self.workspaces.len() - 1;
        self.new_tab(w, None, cwd, false);
        if focus || self.active.is_empty() {
            self.active = id;
        }
        w
    }

    pub(super) fn new_tab(
        &mut self,
        w: usize,
        label: Option<&str>,
        cwd: Option<String>,
        focus: bool,
    ) -> usize {
        let cwd = cwd.or_else(|| self.focused_cwd(w));
        let pane = self.new_pane(w, cwd);
        let ws = &mut self.workspaces[w];
        let number = ws.next_tab;
        ws.next_tab += 1;
        let id = format!("{}:t{number}", ws.id);
        ws.tabs.push(Tab {
            id: id.clone(),
            number,
            label: label
                .map(str::to_owned)
                .unwrap_or_else(|| number.to_string()),
            focused: pane.id.clone(),
            panes: vec![pane],
            zoomed: false,
        });
        if focus || ws.active_tab.is_empty() {
            ws.active_tab = id;
            if focus {
                self.active = self.workspaces[w].id.clone();
            }
        }
        self.workspaces[w].tabs.len() - 1
    }

    pub(super) fn split(&mut self, at: At, cwd: Option<String>, focus: bool) -> At {
        let pane = self.new_pane(at.0, cwd);
        let tab = self.tab_mut((at.0, at.1));
        if focus {
            tab.focused = pane.id.clone();
        }
        tab.panes.insert(at.2 + 1, pane);
        (at.0, at.1, at.2 + 1)
    }

    fn focused_cwd(&self, w: usize) -> Option<String> {
        let ws = &self.workspaces[w];
        let tab = ws.tabs.iter().find(|t| t.id == ws.active_tab)?;
        tab.panes.iter().find(|p| p.id == tab.focused)?.cwd.clone()
    }

    pub(super) fn close_workspace(&mut self, w: usize) {
        let removed = self.workspaces.remove(w);
        if removed.id == self.active {
            self.active = self
                .workspaces
                .first()
                .map(|ws| ws.id.clone())
                .unwrap_or_default();
        }
    }

    pub(super) fn close_tab(&mut self, w: usize, t: usize) {
        let ws = &mut self.workspaces[w];
        let removed = ws.tabs.remove(t);
        if ws.tabs.is_empty() {
            self.close_workspace(w);
        } else if removed.id == ws.active_tab {
            ws.active_tab = ws.tabs[t.min(ws.tabs.len() - 1)].id.clone();
        }
    }

    pub(super) fn close_pane(&mut self, at: At) {
        let tab = self.tab_mut((at.0, at.1));
        let removed = tab.panes.remove(at.2);
        if tab.panes.is_empty() {
            self.close_tab(at.0, at.1);
            return;
        }
        if tab.panes.len() == 1 {
            tab.zoomed = false;
        }
        if removed.id == tab.focused {
            tab.focused = tab.panes[at.2.min(tab.panes.len() - 1)].id.clone();
        }
    }

    pub(super) fn focus_tab(&mut self, w: usize, t: usize) {
        self.workspaces[w].active_tab = self.workspaces[w].tabs[t].id.clone();
        self.active = self.workspaces[w].id.clone();
    }

    pub(super) fn focus_pane(&mut self, at: At) {
        self.focus_tab(at.0, at.1);
        let tab = self.tab_mut((at.0, at.1));
        tab.focused = tab.panes[at.2].id.clone();
    }

    pub(super) fn workspace_at(&self, id: &str) -> Option<usize> {
        self.workspaces.iter().position(|ws| ws.id == id)
    }

    pub(super) fn pane_at(&self, id: &str) -> Option<At> {
        self.all_panes()
            .into_iter()
            .find(|&at| self.pane(at).id == id)
    }

    /// [`Session::workspace_at`], or herdr's `workspace_not_found`.
    pub(super) fn find_workspace(&self, id: &str) -> Result<usize, Failure> {
        self.workspace_at(id).ok_or_else(|| workspace_not_found(id))
    }

    /// The open tab `id`, or herdr's `tab_not_found`.
    pub(super) fn find_tab(&self, id: &str) -> Result<TabAt, Failure> {
        let found = self
            .all_tabs()
            .into_iter()
            .find(|&at| self.tab(at).id == id);
        found.ok_or_else(|| tab_not_found(id))
    }

    /// [`Session::pane_at`], or herdr's `pane_not_found`.
    pub(super) fn find_pane(&self, id: &str) -> Result<At, Failure> {
        self.pane_at(id).ok_or_else(|| pane_not_found(id))
    }

    /// A pane with an agent, named by its pane id or its agent name, or herdr's `agent_not_found`.
    pub(super) fn find_agent(&self, target: &str) -> Result<At, Failure> {
        let found = self.all_panes().into_iter().find(|&at| {
            let pane = self.pane(at);
            pane.agent.is_some() && (pane.id == target || pane.name.as_deref() == Some(target))
        });
        found.ok_or_else(|| agent_not_found(target))
    }

    /// The linked plugin `id`, or herdr's `plugin_not_found`.
    pub(super) fn find_plugin(&self, id: &str) -> Result<usize, Failure> {
        let found = self.plugins.iter().position(|pl| pl.id == id);
        found.ok_or_else(|| plugin_not_found(id))
    }

    /// An optional `pane_id`: the named pane, else the focused one.
    pub(super) fn resolve(&self, pane_id: Option<&str>) -> Result<At, Failure> {
        match pane_id {
            Some(id) => self.find_pane(id),
            None => self.focused().ok_or_else(|| pane_not_found("(focused)")),
        }
    }

    pub(super) fn all_tabs(&self) -> Vec<TabAt> {
        let mut out = Vec::new();
        for (w, ws) in self.workspaces.iter().enumerate() {
            out.extend((0..ws.tabs.len()).map(|t| (w, t)));
        }
        out
    }

    pub(super) fn all_panes(&self) -> Vec<At> {
        let mut out = Vec::new();
        for (w, t) in self.all_tabs() {
            out.extend((0..self.tab((w, t)).panes.len()).map(|p| (w, t, p)));
        }
        out
    }

    /// The tabs of workspace `w`, or of all workspaces.
    pub(super) fn tabs_in(&self, w: Option<usize>) -> Vec<TabAt> {
        let tabs = self.all_tabs().into_iter();
        tabs.filter(|at| w.is_none_or(|w| at.0 == w)).collect()
    }

    /// The panes of workspace `w`, or of all workspaces.
    pub(super) fn panes_in(&self, w: Option<usize>) -> Vec<At> {
        let panes = self.all_panes().into_iter();
        panes.filter(|at| w.is_none_or(|w| at.0 == w)).collect()
    }

    pub(super) fn tab(&self, (w, t): TabAt) -> &Tab {
        &self.workspaces[w].tabs[t]
    }

    pub(super) fn tab_mut(&mut self, (w, t): TabAt) -> &mut Tab {
        &mut self.workspaces[w].tabs[t]
    }

    pub(super) fn pane(&self, at: At) -> &Pane {
        &self.tab((at.0, at.1)).panes[at.2]
    }

    pub(super) fn pane_mut(&mut self, at: At) -> &mut Pane {
        &mut self.tab_mut((at.0, at.1)).panes[at.2]
    }

    pub(super) fn focused(&self) -> Option<At> {
        let w = self.workspace_at(&self.active)?;
        let ws = &self.workspaces[w];
        let t = ws.tabs.iter().position(|t| t.id == ws.active_tab)?;
        let tab = &ws.tabs[t];
        let p = tab.panes.iter().position(|p| p.id == tab.focused)?;
        Some((w, t, p))
    }

    pub(super) fn focused_in_tab(&self, at: At) -> String {
        self.tab((at.0, at.1)).focused.clone()
    }

    pub(super) fn is_focused_tab(&self, tab: TabAt) -> bool {
        let ws = &self.workspaces[tab.0];
        ws.id == self.active && ws.tabs[tab.1].id == ws.active_tab
    }

    /// Panes sit side by side, left to right, in a tab.
    pub(super) fn neighbor(&self, at: At, direction: &str) -> Option<String> {
        let panes = &self.tab((at.0, at.1)).panes;
        let i = match direction {
            "left" => at.2.checked_sub(1)?,
            "right" => at.2 + 1,
            _ => return None,
        };
        panes.get(i).map(|p| p.id.clone())
    }
}
