//! JS values handed to the Workers runtime, built by hand where the
//! workers-rs wrappers would build the wrong shape. Tested in a real JS
//! engine by `tests/wasm_start_options.rs` (wasm-bindgen-test in node).

use wasm_bindgen::JsValue;
use worker::js_sys;

/// Build the start options as a plain JS object. worker 0.8.7's
/// `ContainerStartupOptions` carries `env` as a `Map`, which workerd reads
/// as an object with no own properties: the environment would be dropped
/// silently.
pub fn start_options(env: &[(String, String)]) -> Result<js_sys::Object, JsValue> {
    let vars = js_sys::Object::new();
    for (k, v) in env {
        js_sys::Reflect::set(&vars, &JsValue::from_str(k), &JsValue::from_str(v))?;
    }
    let opts = js_sys::Object::new();
    // Hermes reaches model providers; terminal egress is confined inside
    // the container by the egress guard.
    js_sys::Reflect::set(&opts, &JsValue::from_str("enableInternet"), &JsValue::TRUE)?;
    js_sys::Reflect::set(&opts, &JsValue::from_str("env"), &vars)?;
    Ok(opts)
}
