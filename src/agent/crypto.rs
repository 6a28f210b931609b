//! Keyed fingerprints through the runtime's Web Crypto (HMAC-SHA-256), so
//! the object can tell whether the running gateway has the current key set
//! without storing or comparing the keys themselves.

use wasm_bindgen::{JsCast, JsValue};
use worker::js_sys::{
    self, futures::JsFuture, Array, Function, Object, Promise, Reflect, Uint8Array,
};

fn get(obj: &JsValue, key: &str) -> Result<JsValue, String> {
    Reflect::get(obj, &JsValue::from_str(key)).map_err(|e| format!("{key}: {e:?}"))
}

async fn call(obj: &JsValue, method: &str, args: &Array) -> Result<JsValue, String> {
    let f: Function = get(obj, method)?
        .dyn_into()
        .map_err(|_| format!("{method} is not a function"))?;
    let p: Promise = f
        .apply(obj, args)
        .map_err(|e| format!("{method}: {e:?}"))?
        .dyn_into()
        .map_err(|_| format!("{method}: not a promise"))?;
    JsFuture::from(p)
        .await
        .map_err(|e| format!("{method}: {e:?}"))
}

/// Hex HMAC-SHA-256 of `message` under `key`.
pub async fn hmac_sha256_hex(key: &[u8], message: &[u8]) -> Result<String, String> {
    let subtle = get(&get(&js_sys::global(), "crypto")?, "subtle")?;
    let algo = Object::new();
    Reflect::set(&algo, &"name".into(), &"HMAC".into()).map_err(|e| format!("{e:?}"))?;
    Reflect::set(&algo, &"hash".into(), &"SHA-256".into()).map_err(|e| format!("{e:?}"))?;
    let usages = Array::of1(&"sign".into());
    let raw_key = Uint8Array::from(key);
    let crypto_key = call(
        &subtle,
        "importKey",
        &Array::of5(&"raw".into(), &raw_key, &algo, &JsValue::FALSE, &usages),
    )
    .await?;
    let data = Uint8Array::from(message);
    let sig = call(
        &subtle,
        "sign",
        &Array::of3(&"HMAC".into(), &crypto_key, &data),
    )
    .await?;
    let bytes = Uint8Array::new(&sig).to_vec();
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
