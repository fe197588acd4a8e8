use super::*;

fn section(text: &str) -> BridgeConfig {
    toml::from_str(text).unwrap()
}

fn keys(b: &BridgeConfig) -> Vec<String> {
    b.check("b").into_iter().map(|(k, _)| k).collect()
}

/// Which identities take no command: a read-only channel always; the others without an
/// effective gate; never an identity a hook vendor or a gated bridge shares.
#[test]
fn read_only_identities_follow_the_gates_and_shared_identities_stay_answerable() {
    let b = |vendor: &str, mode, control, agent: Option<&str>| BridgeConfig {
        mode,
        control,
        agent: agent.map(|a| aep_adapters::otel::generic::VendorName::new(a).unwrap()),
        ..BridgeConfig::of(vendor, Value::Null)
    };
    let hooked = |a: &str| aep_adapters::vendors::by_vendor(a).is_some();
    let set = |v: Vec<(&str, BridgeConfig)>, can_answer| {
        let m: BTreeMap<String, BridgeConfig> = v.into_iter().map(|(n, c)| (n.to_owned(), c)).collect();
        let mut out: Vec<String> = read_only_agents(&m, can_answer, hooked).into_iter().collect();
        out.sort();
        out
    };
    use BridgeMode::*;
    let all = || {
        vec![
            ("ui", b("agui", Companion, true, None)),
            ("oh", b("openhands", Companion, true, None)),
            ("oc", b("opencode", Primary, true, None)),
            ("watch", b("opencode", Companion, false, Some("oc-watch"))),
            ("kimi", b("kimi-code", Primary, true, Some("kimi-web"))),
        ]
    };
    // With answers able to arrive: AG-UI and the companion watcher only.
    assert_eq!(set(all(), true), ["agui", "oc-watch"]);
    // Without (no token, no relay) no gate is effective; `opencode` is still the plugin's.
    assert_eq!(set(all(), false), ["agui", "kimi-web", "oc-watch", "openhands"]);
    let shared =
        vec![("a", b("openhands", Companion, false, Some("oh"))), ("b", b("openhands", Companion, true, Some("oh")))];
    assert!(set(shared, true).is_empty());
}

#[test]
fn a_section_names_its_vendor_and_the_vendor_checks_its_own_keys() {
    let b = section("vendor = \"kilocode\"\nurl = \"http://127.0.0.1:4096\"\nmode = \"primary\"\ncontrol = true");
    assert_eq!((b.observer().map(|o| o.id), b.agent()), (Some("kilocode"), "kilocode".into()));
    assert!(b.check("bridges.k").is_empty() && b.answerable(true) && !b.answerable(false));
    // The deprecated kind still names the observer.
    let old = section("kind = \"kimi-ws\"\nurl = \"http://127.0.0.1:58627\"\ntoken_file = \"/h/t\"\npoll_ms = 500");
    assert_eq!((old.agent(), keys(&old).len()), ("kimi-code".into(), 0));
    assert_eq!(keys(&section("kind = \"cursor-sse\"\nurl = \"http://h\"")), ["b.kind"]);
    assert_eq!(keys(&section("vendor = \"x\"\nkind = \"kimi-ws\"\nurl = \"http://h\"")), ["b.kind"]);
    assert!(toml::from_str::<BridgeConfig>("agent = \"Not A Token\"").is_err());
    // A vendor's keys belong to it: another vendor's are named, as are bad values.
    let k = |text: &str| keys(&section(&format!("url = \"http://127.0.0.1:1\"\n{text}")));
    assert_eq!(k("vendor = \"opencode\"\ntoken = \"t\""), ["b.token"]);
    assert_eq!(k("vendor = \"kimi-code\"\npoll_ms = 10"), ["b.poll_ms"]);
    assert_eq!(k("vendor = \"openhands\"\npoll_ms = 0\nlisten = \"127.0.0.1:0\""), ["b.listen", "b.poll_ms"]);
    assert_eq!(k("vendor = \"agui\"\ncontrol = true"), ["b.listen", "b.control"]);
    assert_eq!(k("vendor = \"opencode\"\ncontrol = true"), ["b.control"]);
    let empty = BridgeConfig { reply_guard_ms: 10_000, ..BridgeConfig::default() };
    assert_eq!(keys(&empty), ["b.vendor", "b.url", "b.reply_guard_ms"]);
    let mut all = BTreeMap::new();
    all.insert("bad name".to_owned(), b);
    assert_eq!(check_all(&all)[0].0, "bridges.bad name");
}
