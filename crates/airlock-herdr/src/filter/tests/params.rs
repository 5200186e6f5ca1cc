//! The schema types on their own, including the `launch_overlay` ones.

use serde_json::{Map, Value, json};

use super::super::{
    PaneSendInputParams, ParamsMismatch, TabCreateParams, TabTargetParams, decode_params,
};

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => panic!("an object"),
    }
}

#[test]
fn tab_create_follows_the_schema() {
    let params: TabCreateParams = decode_params(object(
        json!({"cwd": "/w", "env": {"A": "1"}, "focus": true, "label": null}),
    ))
    .expect("valid tab.create params");
    assert_eq!(params.cwd.as_deref(), Some("/w"));
    assert_eq!(params.label, None);
    assert_eq!(params.focus, Some(true));
    let empty: TabCreateParams = decode_params(Map::new()).expect("every field is optional");
    assert_eq!(serde_json::to_string(&empty).expect("serialises"), "{}");
    for bad in [
        json!({"focus": null}),
        json!({"env": null}),
        json!({"env": {"A": 1}}),
        json!({"Cwd": "/w"}),
        json!({"command": "sh"}),
    ] {
        let result: Result<TabCreateParams, _> = decode_params(object(bad.clone()));
        assert_eq!(result, Err(ParamsMismatch), "{bad}");
    }
}

#[test]
fn tab_close_and_send_input_follow_the_schema() {
    let close: Result<TabTargetParams, _> = decode_params(object(json!({"tab_id": "w1:t1"})));
    assert!(close.is_ok());
    let close: Result<TabTargetParams, _> = decode_params(Map::new());
    assert_eq!(close, Err(ParamsMismatch));

    let input: PaneSendInputParams = decode_params(object(
        json!({"pane_id": "w1:p2", "text": "ls", "keys": ["Enter"]}),
    ))
    .expect("valid pane.send_input params");
    assert_eq!(input.keys.as_deref(), Some(&["Enter".to_owned()][..]));
    for bad in [
        json!({"pane_id": "w1:p2", "text": null}),
        json!({"pane_id": "w1:p2", "keys": "Enter"}),
        json!({"text": "ls"}),
    ] {
        let result: Result<PaneSendInputParams, _> = decode_params(object(bad.clone()));
        assert_eq!(result, Err(ParamsMismatch), "{bad}");
    }
}
