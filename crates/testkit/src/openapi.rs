//! A small checker of a JSON value against a schema of the node's OpenAPI document: the subset
//! of JSON Schema the derived document uses (`$ref` to `#/components/schemas/`, `type` with
//! `null`, `oneOf`/`anyOf`/`allOf`, `enum`/`const`, `required`, `properties`,
//! `additionalProperties`, `items`, `minimum`/`maximum`, `pattern`). A keyword it does not know
//! fails the check, so that the document cannot outgrow the checker silently.

use serde_json::Value;

/// Keywords that only describe (no constraint on a value).
const DESCRIPTIVE: &[&str] = &[
    "description",
    "format",
    "title",
    "examples",
    "example",
    "default",
];

/// Every way `value` (at JSON path `at`) breaks the schema named `name`; empty when it fits.
pub fn check_named(document: &Value, name: &str, value: &Value) -> Vec<String> {
    let schema = &document["components"]["schemas"][name];
    if schema.is_null() {
        return vec![format!("the document has no schema {name}")];
    }
    let mut errors = Vec::new();
    check(document, schema, value, "$", &mut errors);
    errors
}

/// The response schema of `method path` for `status` and `application/json`, if the document
/// declares one.
pub fn response_schema<'a>(
    document: &'a Value,
    method: &str,
    path: &str,
    status: u16,
) -> Option<&'a Value> {
    let schema = &document["paths"][path][method]["responses"][status.to_string()]["content"]
        ["application/json"]["schema"];
    (!schema.is_null()).then_some(schema)
}

/// Every way `value` breaks `schema`, appended to `errors`.
pub fn check(document: &Value, schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
    let Some(schema) = schema.as_object() else {
        if schema != &Value::Bool(true) {
            errors.push(format!("{at}: schema {schema} is not an object"));
        }
        return;
    };
    for (keyword, argument) in schema {
        match keyword.as_str() {
            "$ref" => {
                let name = argument
                    .as_str()
                    .and_then(|reference| reference.strip_prefix("#/components/schemas/"));
                match name.map(|name| &document["components"]["schemas"][name]) {
                    Some(target) if !target.is_null() => check(document, target, value, at, errors),
                    _ => errors.push(format!("{at}: unresolved reference {argument}")),
                }
            }
            "type" => {
                let types: Vec<&str> = match argument {
                    Value::String(one) => vec![one.as_str()],
                    Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
                    _ => vec![],
                };
                if !types.iter().any(|kind| has_type(value, kind)) {
                    errors.push(format!("{at}: {value} is not of type {argument}"));
                }
            }
            "oneOf" | "anyOf" | "allOf" => {
                let branches = argument.as_array().map(Vec::as_slice).unwrap_or_default();
                let fits: Vec<Vec<String>> = branches
                    .iter()
                    .map(|branch| {
                        let mut branch_errors = Vec::new();
                        check(document, branch, value, at, &mut branch_errors);
                        branch_errors
                    })
                    .collect();
                let matched = fits.iter().filter(|errors| errors.is_empty()).count();
                let fine = match keyword.as_str() {
                    "oneOf" => matched == 1,
                    "anyOf" => matched >= 1,
                    _ => matched == branches.len(),
                };
                if !fine {
                    errors.push(format!(
                        "{at}: {value} matches {matched} of {} branches of {keyword}: {:?}",
                        branches.len(),
                        fits.concat()
                    ));
                }
            }
            "enum" => {
                if !argument
                    .as_array()
                    .is_some_and(|values| values.contains(value))
                {
                    errors.push(format!("{at}: {value} is not one of {argument}"));
                }
            }
            "const" => {
                if argument != value {
                    errors.push(format!("{at}: {value} is not {argument}"));
                }
            }
            "required" => {
                for field in argument.as_array().map(Vec::as_slice).unwrap_or_default() {
                    let field = field.as_str().unwrap_or_default();
                    if value.is_object() && value.get(field).is_none() {
                        errors.push(format!("{at}: required field {field} is missing"));
                    }
                }
            }
            "properties" => {
                let (Some(properties), Some(object)) = (argument.as_object(), value.as_object())
                else {
                    continue;
                };
                for (field, field_value) in object {
                    if let Some(field_schema) = properties.get(field) {
                        check(
                            document,
                            field_schema,
                            field_value,
                            &format!("{at}.{field}"),
                            errors,
                        );
                    }
                }
            }
            "additionalProperties" => {
                let Some(object) = value.as_object() else {
                    continue;
                };
                let known = schema.get("properties").and_then(Value::as_object);
                for (field, field_value) in object {
                    if known.is_some_and(|known| known.contains_key(field)) {
                        continue;
                    }
                    if argument == &Value::Bool(false) {
                        errors.push(format!("{at}: field {field} is not allowed"));
                    } else {
                        check(
                            document,
                            argument,
                            field_value,
                            &format!("{at}.{field}"),
                            errors,
                        );
                    }
                }
            }
            "items" => {
                for (index, item) in value
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                    .iter()
                    .enumerate()
                {
                    check(document, argument, item, &format!("{at}[{index}]"), errors);
                }
            }
            "minimum" | "maximum" => {
                let (Some(bound), Some(number)) = (argument.as_f64(), value.as_f64()) else {
                    continue;
                };
                let within = if keyword == "minimum" {
                    number >= bound
                } else {
                    number <= bound
                };
                if !within {
                    errors.push(format!("{at}: {value} is beyond {keyword} {bound}"));
                }
            }
            "pattern" => {
                let Some(text) = value.as_str() else {
                    continue;
                };
                match argument.as_str().map(regex::Regex::new) {
                    Some(Ok(pattern)) if pattern.is_match(text) => {}
                    Some(Ok(_)) => errors.push(format!("{at}: {text:?} does not match {argument}")),
                    _ => errors.push(format!("{at}: bad pattern {argument}")),
                }
            }
            other if DESCRIPTIVE.contains(&other) => {}
            other => errors.push(format!("{at}: the checker does not know keyword {other}")),
        }
    }
}

fn has_type(value: &Value, kind: &str) -> bool {
    match kind {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "number" => value.is_number(),
        // serde_json reads an integer beyond 2^64 (a u128 valuation) as a float: whole is enough.
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn document() -> Value {
        json!({"components": {"schemas": {
            "Thing": {"type": "object", "required": ["id", "hash"], "properties": {
                "id": {"type": "integer", "minimum": 0},
                "hash": {"type": "string", "pattern": "^[0-9a-f]{4}$"},
                "state": {"type": "string", "enum": ["a", "b"]},
                "inner": {"oneOf": [{"type": "null"}, {"$ref": "#/components/schemas/Inner"}]},
                "list": {"type": "array", "items": {"type": ["number", "null"]}}}},
            "Inner": {"type": "object", "required": ["x"], "properties": {"x": {"type": "boolean"}}}
        }}})
    }

    #[test]
    fn a_fitting_value_passes_and_each_kind_of_misfit_is_named() {
        let document = document();
        let good = json!({"id": 3, "hash": "00af", "state": "a", "inner": {"x": true}, "list": [1.5, null]});
        assert_eq!(check_named(&document, "Thing", &good), Vec::<String>::new());
        let bad = [
            (json!({"hash": "00af"}), "required field id"),
            (json!({"id": -1, "hash": "00af"}), "minimum"),
            (json!({"id": 1, "hash": "00AF"}), "does not match"),
            (
                json!({"id": 1, "hash": "00af", "state": "c"}),
                "is not one of",
            ),
            (json!({"id": 1, "hash": "00af", "inner": {"y": 1}}), "oneOf"),
            (json!({"id": 1.5, "hash": "00af"}), "not of type"),
            (
                json!({"id": 1, "hash": "00af", "list": ["x"]}),
                "not of type",
            ),
        ];
        for (value, expected) in bad {
            let errors = check_named(&document, "Thing", &value);
            assert!(
                errors.iter().any(|error| error.contains(expected)),
                "{value}: {errors:?}"
            );
        }
    }

    #[test]
    fn an_unknown_keyword_fails_rather_than_passing_silently() {
        let document = json!({"components": {"schemas": {"T": {"multipleOf": 2}}}});
        let errors = check_named(&document, "T", &json!(3));
        assert!(
            errors[0].contains("does not know keyword multipleOf"),
            "{errors:?}"
        );
    }
}
