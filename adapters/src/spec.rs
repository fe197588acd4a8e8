//! What the bridge knows about a vendor beyond its mapping, as data kept in the vendor's
//! own folder (`vendors/<vendor>/`): the manifest `aep-bridge adapters` prints, which
//! moments the control loop may hold and how the vendor's reply to an answer is shaped,
//! the vendor's own server (its observer and the reply route answering around the agent),
//! and how `aep-bridge install` wires the agent (settings file, hook list, plugin asset).
//!
//! Everything that could drift is derived from one place: the listing's control line, the
//! install plan's hook timeouts and the bridge's hold decision all read [`ControlSpec`].

use serde_json::{Map, Value, json};

use crate::{EventDraft, HookAdapter, MapContext};

/// One built-in vendor: its hook mapping and everything the bridge does around it.
pub struct VendorSpec {
    /// Agent identity and `x.{id}.*` token, e.g. `claude-code`.
    pub id: &'static str,
    /// Human name.
    pub display_name: &'static str,
    /// Executables whose presence on PATH means "installed".
    pub executables: &'static [&'static str],
    /// How hooks reach the bridge, in a few words.
    pub hook_channel: &'static str,
    /// AEP families it emits.
    pub families: &'static [&'static str],
    /// How to wire it, when `install` does not (or as a hint beside it).
    pub setup: &'static str,
    /// Held moments, the opt-in gate and the reply shape.
    pub control: ControlSpec,
    /// What `aep-bridge install` writes; `None` when wiring is manual.
    pub install: Option<InstallSpec>,
    /// The vendor's own server, when the bridge observes it or answers through it.
    pub server: Option<ServerSpec>,
    /// The vendor's OTel profile, when it exports OTLP logs the bridge maps.
    pub otel: Option<&'static dyn crate::otel::OtelProfile>,
    /// The hook adapter; `None` for a vendor observed only over its own server (it has no
    /// hooks: OpenHands).
    pub adapter: Option<fn() -> Box<dyn HookAdapter>>,
}

impl std::fmt::Debug for VendorSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VendorSpec").field("id", &self.id).finish_non_exhaustive()
    }
}

/// Which moments a vendor lets a human decide through the bridge (AEP-0004 §5).
#[derive(Debug, Clone, Copy)]
pub struct ControlSpec {
    /// Moments held open whenever an answer channel exists (a token or a relay): the
    /// vendor consumes the hook's reply as the decision.
    pub held: &'static [&'static str],
    /// An opt-in gate (`[control.gates]`): a blockable pre-tool moment where the bridge
    /// raises and holds a permission request itself.
    pub gate: Option<Gate>,
    /// Shapes the vendor's reply to an applied decision; `None` for observe-only vendors.
    pub reply: Option<ReplyFn>,
}

/// Builds a vendor's hook reply from the held moment and the applied decision. `None`
/// means "no reply body" (the neutral reply applies).
pub type ReplyFn = fn(&Held<'_>, &Decision) -> Option<Value>;

/// The held moment a reply answers.
#[derive(Debug, Clone, Copy)]
pub struct Held<'a> {
    /// The hook name.
    pub hook: &'a str,
    /// The hook payload as the vendor sent it.
    pub payload: &'a Value,
}

/// An opt-in permission gate on a vendor's pre-tool moment.
#[derive(Debug, Clone, Copy)]
pub struct Gate {
    /// The hook name of the blockable pre-tool moment.
    pub moment: &'static str,
    /// Options offered beyond allow/deny (VS Code's `ask`: escalate to its own dialog).
    pub extra_options: &'static [(&'static str, &'static str)],
}

/// The answer as applied to a request (AEP-0008: `option` states what was decided).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decision {
    /// The applied option id.
    pub option: Option<String>,
    /// Guidance text (the deny reason, or an `other` free answer).
    pub text: Option<String>,
    /// Form values (field id -> answer), AEP-0006.
    pub values: Option<Map<String, Value>>,
}

/// The reason given to an agent when a denial carries no text of its own.
pub const DEFAULT_DENY_REASON: &str = "Denied via AEP attention loop";

impl Decision {
    /// Whether the applied option lets the action proceed (`always-{n}`: allow, with a
    /// vendor's standing-permission suggestion applied).
    pub fn allows(&self) -> bool {
        matches!(self.option.as_deref(), Some("allow" | "once" | "always" | "accept" | "yes"))
            || self.option.as_deref().is_some_and(|o| o.starts_with("always-"))
    }

    /// The text to give the agent with a denial.
    pub fn reason(&self) -> String {
        self.text.clone().unwrap_or_else(|| DEFAULT_DENY_REASON.to_owned())
    }
}

impl ControlSpec {
    /// A vendor the bridge only observes.
    pub const OBSERVE_ONLY: ControlSpec = ControlSpec { held: &[], gate: None, reply: None };

    /// Whether `hook` is held by default (when an answer channel exists).
    pub fn holds(&self, hook: &str) -> bool {
        self.held.contains(&hook)
    }

    /// Whether `hook` may be held at all: a default-held moment or the gate's moment.
    pub fn may_hold(&self, hook: &str) -> bool {
        self.holds(hook) || self.gate.is_some_and(|g| g.moment == hook)
    }

    /// The line `aep-bridge adapters` prints for this vendor's control.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.held.is_empty() {
            parts.push(format!("hold-open: {} answered by control.attention.respond", self.held.join(", ")));
        }
        if let Some(g) = self.gate {
            parts.push(format!("opt-in gate on {} ([control.gates])", g.moment));
        }
        if parts.is_empty() { "observe-only".to_owned() } else { parts.join("; ") }
    }

    /// The vendor's reply bytes for `decision` on a held moment; empty when the vendor
    /// has no reply shape for it (the neutral reply then applies).
    pub fn reply_bytes(&self, held: &Held<'_>, decision: &Decision) -> Vec<u8> {
        self.reply.and_then(|f| f(held, decision)).and_then(|v| serde_json::to_vec(&v).ok()).unwrap_or_default()
    }
}

/// The tool name of a pre-tool payload, whatever the vendor calls the field.
pub fn tool_of(payload: &Value) -> Option<&str> {
    ["tool_name", "toolName", "tool"]
        .iter()
        .find_map(|k| payload.get(*k).and_then(Value::as_str))
        .or_else(|| payload.pointer("/event/toolName").and_then(Value::as_str))
}

/// The permission request an opt-in gate raises on `tool` (AEP-0004 §5: the core verb,
/// no vendor verb minted), with the gate's extra options after allow/deny.
pub fn gate_request(vendor: &str, gate: &Gate, tool: &str, payload: &Value, cx: &MapContext) -> EventDraft {
    let input = payload.get("tool_input").or_else(|| payload.get("args")).or_else(|| payload.pointer("/event/input"));
    let mut d = crate::common::permission_request(vendor, tool, input, cx);
    if !gate.extra_options.is_empty()
        && let Some(Value::Array(options)) = d.data.get_mut("options")
    {
        for (id, label) in gate.extra_options {
            options.push(json!({"id": id, "label": label}));
        }
    }
    d
}

/// The vendor's own server, which the bridge reaches beside the hooks: observed over its
/// event stream, and answered through without the agent holding the ask open.
#[derive(Debug, Clone, Copy)]
pub struct ServerSpec {
    /// The observer attaching to it (`[bridges.<name>] vendor = "<id>"`), when one is built.
    pub observer: Option<&'static crate::observer::ObserverSpec>,
    /// Where the answer to an ask nothing holds open is written, when the server takes one.
    pub reply_route: Option<ReplyRoute>,
}

/// A server's reply route: an answer to an ask the agent does not hold open is written
/// around it as `POST {base}{path}` with the option (and free text where the body takes
/// it); the ack is the answer's 2xx (and the body's verdict where the server puts one
/// there); the vendor's own broadcast settles the ask. The I/O is the bridge's; this is the
/// shape it follows.
#[derive(Debug, Clone, Copy)]
pub struct ReplyRoute {
    /// The plugin moment forwarding the server's bus, when a plugin asks there: the hook
    /// receiver raises the route's asks from it and settles them by it.
    pub bus: Option<BusMoment>,
    /// The vendor request id an observed event (a bus event, an observer frame) settles,
    /// if it settles one.
    pub settled: fn(&Value) -> Option<&str>,
    /// The server's reply vocabulary `(id, label)`, offered verbatim as the card's options.
    pub options: &'static [(&'static str, &'static str)],
    /// The path under the server's base URL; `{session}` and `{id}` (the vendor request id)
    /// stand for path segments.
    pub path: &'static str,
    /// The body field carrying the option.
    pub option_field: &'static str,
    /// The body field carrying free text, when the route takes any.
    pub text_field: Option<&'static str>,
    /// Reads the vendor's verdict from a 2xx answer's body (`Err` says why it refused);
    /// `None`: the 2xx is the ack.
    pub verdict: Option<VerdictFn>,
    /// Builds the body when it is not `{option_field: option, text_field: text}` (a body
    /// whose fields are not the option's id and the text as given).
    pub encode: Option<EncodeFn>,
    /// What a command's `attention.resolved` is caused by, after its `attention.answered`.
    pub outcome_cause: OutcomeCause,
}

/// Builds a route's body from the option and the free text.
pub type EncodeFn = fn(&str, Option<&str>) -> Value;

/// What the `attention.resolved` of an ask answered over a reply route names as its
/// `cause` (AEP-0004 §5: the outcomes are cause-linked to the command, directly or through
/// the answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutcomeCause {
    /// The `attention.answered` before it (which the command caused).
    Answered,
    /// The command itself, as `attention.answered` is.
    Command,
}

/// Reads a server's verdict from its 2xx answer's body: `Err` says why it refused.
pub type VerdictFn = fn(&[u8]) -> Result<(), String>;

/// The plugin moment that forwards a server's bus events to the hook receiver.
#[derive(Debug, Clone, Copy)]
pub struct BusMoment {
    /// The hook name of the moment.
    pub hook: &'static str,
    /// JSON pointer to the bus event in its payload.
    pub event: &'static str,
    /// JSON pointer to the server's base URL in its payload.
    pub server: &'static str,
}

impl ReplyRoute {
    /// Whether hook `hook` carries this route's asks (the plugin's bus moment).
    pub fn asks_on(&self, hook: &str) -> bool {
        self.bus.is_some_and(|b| b.hook == hook)
    }

    /// The vendor request id a `hook` payload settles: a bus moment forwarding a settling event.
    pub fn settled_by<'a>(&self, hook: &str, payload: &'a Value) -> Option<&'a str> {
        let bus = self.bus.filter(|b| b.hook == hook)?;
        (self.settled)(payload.pointer(bus.event)?)
    }

    /// The server's base URL a bus moment's payload names, as given (the bridge decides
    /// whether it writes there).
    pub fn server_of<'a>(&self, payload: &'a Value) -> Option<&'a str> {
        payload.pointer(self.bus?.server)?.as_str()
    }

    /// Whether the body takes free text.
    pub fn takes_text(&self) -> bool {
        self.text_field.is_some()
    }

    /// The path of the answer to request `id` in `session`, both given as encoded path
    /// segments (inserted verbatim, never re-read as placeholders).
    pub fn path_for(&self, session: &str, id: &str) -> String {
        let mut out = String::with_capacity(self.path.len() + session.len() + id.len());
        let mut rest = self.path;
        while let Some(i) = rest.find('{') {
            out.push_str(&rest[..i]);
            rest = &rest[i..];
            if let Some(r) = rest.strip_prefix("{session}") {
                out.push_str(session);
                rest = r;
            } else if let Some(r) = rest.strip_prefix("{id}") {
                out.push_str(id);
                rest = r;
            } else {
                out.push('{');
                rest = &rest[1..];
            }
        }
        out.push_str(rest);
        out
    }

    /// The answer's body: the option, and the text when the route takes it.
    pub fn body(&self, option: &str, text: Option<&str>) -> Value {
        if let Some(encode) = self.encode {
            return encode(option, text);
        }
        let mut body = Map::new();
        body.insert(self.option_field.to_owned(), json!(option));
        if let (Some(field), Some(t)) = (self.text_field, text) {
            body.insert(field.to_owned(), json!(t));
        }
        Value::Object(body)
    }

    /// The vendor's verdict on a 2xx answer with `body`.
    pub fn accepted(&self, body: &[u8]) -> Result<(), String> {
        self.verdict.map_or(Ok(()), |read| read(body))
    }

    /// The options as an AEP-0008 `options` array.
    pub fn options_value(&self) -> Value {
        Value::Array(self.options.iter().map(|(id, label)| json!({"id": id, "label": label})).collect())
    }

    /// The option ids as a sentence's list: `once, always or reject`.
    pub fn option_list(&self) -> String {
        let ids: Vec<&str> = self.options.iter().map(|(id, _)| *id).collect();
        match ids.split_last() {
            None => String::new(),
            Some((last, [])) => (*last).to_owned(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        }
    }

    /// The gated decoration of an answerable card: the route's vocabulary as its options
    /// and the control channel declared (AEP-0008 `respond_via`).
    pub fn decorate(&self, d: &mut EventDraft) {
        d.data.insert("options".into(), self.options_value());
        d.data.insert("respond_via".into(), json!(["control"]));
    }

    /// The line `aep-bridge adapters` prints for the route.
    pub fn describe(&self) -> String {
        let ids: Vec<&str> = self.options.iter().map(|(id, _)| *id).collect();
        let mut body = format!("{}: {}", self.option_field, ids.join("|"));
        if let Some(t) = self.text_field {
            body.push_str(&format!(", {t}: text"));
        }
        let mut line = format!("POST {} {{{body}}}", self.path);
        line.push_str(if self.verdict.is_some() { "; ack: 2xx and the body's verdict" } else { "; ack: 2xx" });
        if let Some(b) = self.bus {
            line.push_str(&format!("; plugin asks on hook `{}`", b.hook));
        }
        line
    }
}

/// How `aep-bridge install` wires a vendor.
#[derive(Debug, Clone, Copy)]
pub enum InstallSpec {
    /// Merge `aep-hook <vendor>` entries into the vendor's JSON (or JSONC) settings file.
    Hooks(HooksInstall),
    /// Write a plugin or extension file verbatim.
    Asset(AssetInstall),
    /// Write one hook script per vendor event into the vendor's hooks folder, each running
    /// `aep-hook <vendor>` (Cline discovers hooks by file name).
    HookScripts(HookScriptsInstall),
    /// Append a `hooks:` block to the vendor's YAML config (Hermes); a file that already
    /// has a top-level `hooks:` key is left to the user, with the block to merge.
    YamlHooks(YamlHooksInstall),
}

/// One hook script per event in a hooks folder.
#[derive(Debug, Clone, Copy)]
pub struct HookScriptsInstall {
    /// The folder, relative to a project directory.
    pub project_dir: &'static str,
    /// The folder, relative to the home directory.
    pub user_dir: &'static str,
    /// An environment variable naming the vendor's home folder, which then holds
    /// `hooks/` instead (e.g. `CLINE_DIR`).
    pub user_dir_env: Option<&'static str>,
    /// The vendor's event file names (without the suffix).
    pub events: &'static [&'static str],
    /// The file name suffix (the vendor picks the interpreter by it).
    pub suffix: &'static str,
}

/// A `hooks:` block in a YAML config read only from the user's home.
#[derive(Debug, Clone, Copy)]
pub struct YamlHooksInstall {
    /// The config file, relative to the home directory.
    pub user_file: &'static str,
    /// An environment variable naming the folder that holds the file instead (e.g. `HERMES_HOME`).
    pub user_dir_env: Option<&'static str>,
    /// The hook events to wire.
    pub events: &'static [&'static str],
    /// A step the user still has to take, if any.
    pub note: Option<&'static str>,
}

/// A hook-list install into a settings file.
#[derive(Debug, Clone, Copy)]
pub struct HooksInstall {
    /// The settings file, relative to a project directory (`--project DIR`).
    pub project_file: &'static str,
    /// The settings file, relative to the home directory (`--user`).
    pub user_file: &'static str,
    /// An environment variable that, when set, names the folder holding the user-level
    /// file instead (e.g. `CLAUDE_CONFIG_DIR`, `CODEX_HOME`).
    pub user_dir_env: Option<&'static str>,
    /// The hook events to wire.
    pub hooks: &'static [HookEntry],
    /// The unit of the vendor's `timeout` field.
    pub timeout_unit: TimeUnit,
    /// Also ensure `hooksConfig.enabled = true` (Gemini CLI).
    pub enable_hooks_config: bool,
}

/// One hook event to wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HookEntry {
    /// The vendor's event name.
    pub event: &'static str,
    /// `true` for tool events (written with `"matcher": "*"`).
    pub matcher: bool,
    /// The most seconds the vendor accepts for this hook, if it clamps.
    pub max_secs: Option<u64>,
}

/// A hook event to wire (const constructor for the vendor tables).
pub const fn hook(event: &'static str, matcher: bool) -> HookEntry {
    HookEntry { event, matcher, max_secs: None }
}

/// A hook event whose timeout the vendor clamps to `max_secs` (with a warning on every
/// run when the file asks for more): written at most that.
pub const fn hook_capped(event: &'static str, matcher: bool, max_secs: u64) -> HookEntry {
    HookEntry { event, matcher, max_secs: Some(max_secs) }
}

impl HookEntry {
    /// The timeout to write for this entry: the vendor's for the moment, within the cap.
    pub fn timeout(&self, vendor: &VendorSpec, unit: TimeUnit) -> u64 {
        let t = vendor.hook_timeout(self.event, unit);
        match (self.max_secs, unit) {
            (Some(m), TimeUnit::Seconds) => t.min(m),
            (Some(m), TimeUnit::Millis) => t.min(m * 1000),
            (None, _) => t,
        }
    }
}

/// The unit of a vendor's hook timeout field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    /// Seconds (Claude Code, Codex).
    Seconds,
    /// Milliseconds (Gemini CLI, Qwen Code).
    Millis,
}

/// A plugin or extension file.
#[derive(Debug, Clone, Copy)]
pub struct AssetInstall {
    /// The file, relative to a project directory.
    pub project_file: &'static str,
    /// The file, relative to the home directory.
    pub user_file: &'static str,
    /// Its content.
    pub content: &'static str,
    /// A step the user still has to take, if any.
    pub note: Option<&'static str>,
    /// A step a project install still needs (in place of `note`), if any.
    pub project_note: Option<&'static str>,
    /// The plugin SDK the agent installs beside its plugins at start, if it does.
    pub deps: Option<PluginDeps>,
}

/// The plugin SDK an OpenCode-family agent installs from npm into its config directories
/// before it loads any plugin, at every start until it succeeds, and waits for (offline:
/// about 70 s of retries). Its check skips the install when the directory has `node_modules`
/// and its `package-lock.json` lists the package. The aep-bridge plugin imports nothing, so
/// `aep-bridge install` writes that state where the directory has neither yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PluginDeps {
    /// The package (`@opencode-ai/plugin`, `@kilocode/plugin`).
    pub package: &'static str,
    /// The user's config directory (relative to home) when the agent installs into it
    /// whether or not it holds a plugin (OpenCode 1.18 does, into every config directory;
    /// Kilo Code 7.7 only into those holding one): a project install writes it there too.
    pub user_dir_always: Option<&'static str>,
}

/// How long the agent lets a held hook run, in seconds: above the bridge's default
/// attention window (55 s) and the shim's hold bound, so the bridge's own timeout (and
/// its `attention.timeout` event) comes first and the agent's dialog then takes over.
pub const HELD_HOOK_TIMEOUT_SECS: u64 = 70;

/// How long the agent lets any other hook run, in seconds (the shim answers within 3 s).
pub const HOOK_TIMEOUT_SECS: u64 = 10;

impl VendorSpec {
    /// The reply route of the vendor's server, if it has one.
    pub fn reply_route(&'static self) -> Option<&'static ReplyRoute> {
        self.server.as_ref()?.reply_route.as_ref()
    }

    /// The observer of the vendor's server, if one is built.
    pub fn observer(&self) -> Option<&'static crate::observer::ObserverSpec> {
        self.server?.observer
    }

    /// The timeout to write for `event`, in the install's unit: long for moments the
    /// control loop may hold, short for the rest.
    pub fn hook_timeout(&self, event: &str, unit: TimeUnit) -> u64 {
        let secs = if self.control.may_hold(event) { HELD_HOOK_TIMEOUT_SECS } else { HOOK_TIMEOUT_SECS };
        match unit {
            TimeUnit::Seconds => secs,
            TimeUnit::Millis => secs * 1000,
        }
    }
}
