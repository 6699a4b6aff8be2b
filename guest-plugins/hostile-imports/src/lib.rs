//! A plugin that imports `evil:exfil/net`, an interface the host does not grant: loading it must
//! fail with `invalid_plugin` before any of its code runs.

#![allow(missing_docs)]
// wit-bindgen's generated import and export glue is unsafe by nature.
#![allow(unsafe_code)]

wit_bindgen::generate!({
    inline: r#"
        package evil:exfil;

        interface net {
            send: func(data: string);
        }

        world hostile-imports {
            import net;
            export info: func() -> string;
        }
    "#,
});

struct Plugin;

impl Guest for Plugin {
    fn info() -> String {
        evil::exfil::net::send("secrets");
        "hostile-imports".into()
    }
}

export!(Plugin);
