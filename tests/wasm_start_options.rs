//! The container start options, checked in a real JS engine (node, via
//! wasm-bindgen-test-runner): worker 0.8.7's `ContainerStartupOptions`
//! carries `env` as a `Map`, which the runtime reads as an object without
//! own properties, silently dropping the environment. Ours must be a plain
//! object whose own properties are the variables.
#![cfg(target_arch = "wasm32")]

use hermes_edge::js_options::start_options;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_test::wasm_bindgen_test;
use worker::js_sys::{Map, Object, Reflect, JSON};

#[wasm_bindgen_test]
fn env_is_a_plain_object_with_own_properties() {
    let env = vec![
        ("CONTROL_TOKEN".to_owned(), "t0k3n".to_owned()),
        ("BOOT_ID".to_owned(), "b1".to_owned()),
        ("AGENT_ID".to_owned(), "agent-0001".to_owned()),
    ];
    let opts = start_options(&env).unwrap();
    let vars = Reflect::get(&opts, &JsValue::from_str("env")).unwrap();
    assert!(!vars.is_instance_of::<Map>(), "env must not be a Map");
    let keys: Vec<String> = Object::keys(&Object::from(vars.clone()))
        .iter()
        .filter_map(|k| k.as_string())
        .collect();
    assert_eq!(keys, vec!["CONTROL_TOKEN", "BOOT_ID", "AGENT_ID"]);
    assert_eq!(
        Reflect::get(&vars, &JsValue::from_str("BOOT_ID"))
            .unwrap()
            .as_string()
            .as_deref(),
        Some("b1")
    );
    let json = JSON::stringify(&opts).unwrap().as_string().unwrap();
    assert_eq!(
        json,
        r#"{"enableInternet":true,"env":{"CONTROL_TOKEN":"t0k3n","BOOT_ID":"b1","AGENT_ID":"agent-0001"}}"#
    );
    // What the workers-rs wrapper would have produced loses the variables
    // in exactly this check: a Map has no own enumerable properties.
    let map = Map::new();
    map.set(&JsValue::from_str("A"), &JsValue::from_str("1"));
    assert_eq!(Object::keys(&Object::from(JsValue::from(map))).length(), 0);
}
