//! Just enough of ElementTree (`xml.etree.ElementTree.fromstring`, expat underneath, namespace
//! processing on) for `parse_log_doctest`: a well-formedness check and a tree of element names
//! and attributes.
//!
//! The text always starts at `<doctest`, so there is no XML declaration and no DOCTYPE: the only
//! entities are the five predefined ones and character references. Checked as expat checks:
//! tag nesting and matching, one root element followed only by comments, processing
//! instructions and whitespace, attribute syntax (quotes, no `<`, whitespace between
//! attributes, no duplicates), references, the XML 1.0 character set, `]]>` outside CDATA,
//! `--` inside comments, reserved `xml` PI targets and unbound namespace prefixes. Element and
//! attribute names are resolved like ElementTree's (`{uri}local`), so an element in a namespace
//! is never a plain `TestCase`. Attribute values are normalised as expat does (tab, newline and
//! carriage return become a space; `\r\n` one space).
//!
//! Not reproduced: names use the XML 1.0 fifth-edition character classes where expat uses
//! older tables for non-ASCII names; the error messages are this crate's own.

use std::fmt;

/// The namespace the `xml` prefix is bound to.
const XML_NAMESPACE: &str = "http://www.w3.org/XML/1998/namespace";

/// Why a text is not a well-formed XML document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct XmlError {
    /// Byte offset into the text.
    at: usize,
    what: &'static str,
}

impl fmt::Display for XmlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.what, self.at)
    }
}

/// One element: its resolved name, attributes (resolved names, normalised values) and where
/// its subtree ends in document order.
#[derive(Debug)]
struct Element {
    name: String,
    attributes: Vec<(String, String)>,
    /// One past the index of its last descendant.
    end: usize,
}

/// The elements of a document in document order (the root first).
#[derive(Debug)]
pub(crate) struct Document {
    elements: Vec<Element>,
}

impl Document {
    /// The root element.
    pub(crate) fn root(&self) -> usize {
        0
    }

    /// `element.findall(".//name")`: every descendant (not the element itself) whose resolved
    /// name is `name`, in document order.
    pub(crate) fn descendants_named<'a>(
        &'a self,
        element: usize,
        name: &'a str,
    ) -> impl Iterator<Item = usize> + 'a {
        (element + 1..self.elements[element].end).filter(move |&at| self.elements[at].name == name)
    }

    /// `element.findall(name)` (and, its first item, `element.find(name)`): the element's
    /// children, not deeper descendants, whose resolved name is `name`, in document order.
    pub(crate) fn children_named<'a>(
        &'a self,
        element: usize,
        name: &'a str,
    ) -> impl Iterator<Item = usize> + 'a {
        let end = self.elements[element].end;
        let mut at = element + 1;
        std::iter::from_fn(move || {
            while at < end {
                let child = at;
                at = self.elements[child].end;
                if self.elements[child].name == name {
                    return Some(child);
                }
            }
            None
        })
    }

    /// `element.get(name)` for an attribute without a namespace.
    pub(crate) fn attribute(&self, element: usize, name: &str) -> Option<&str> {
        self.elements[element]
            .attributes
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// Parses a complete document.
pub(crate) fn parse(text: &str) -> Result<Document, XmlError> {
    Reader {
        text,
        at: 0,
        elements: Vec::new(),
        open: Vec::new(),
        bindings: Vec::new(),
    }
    .document()
}

/// An open element: its index, its name as written, and how many namespace bindings were in
/// scope before it.
struct Open<'t> {
    index: usize,
    qname: &'t str,
    bindings_before: usize,
}

struct Reader<'t> {
    text: &'t str,
    at: usize,
    elements: Vec<Element>,
    open: Vec<Open<'t>>,
    /// Namespace bindings in scope, innermost last: (prefix, uri); the default namespace has
    /// the prefix `""` and an empty uri undeclares it.
    bindings: Vec<(&'t str, String)>,
}

fn is_xml_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || (c >= ' ' && c != '\u{FFFE}' && c != '\u{FFFF}')
}

fn is_name_start(c: char) -> bool {
    matches!(c,
        ':' | 'A'..='Z' | '_' | 'a'..='z' | '\u{C0}'..='\u{D6}' | '\u{D8}'..='\u{F6}'
        | '\u{F8}'..='\u{2FF}' | '\u{370}'..='\u{37D}' | '\u{37F}'..='\u{1FFF}'
        | '\u{200C}'..='\u{200D}' | '\u{2070}'..='\u{218F}' | '\u{2C00}'..='\u{2FEF}'
        | '\u{3001}'..='\u{D7FF}' | '\u{F900}'..='\u{FDCF}' | '\u{FDF0}'..='\u{FFFD}'
        | '\u{10000}'..='\u{EFFFF}')
}

fn is_name_char(c: char) -> bool {
    is_name_start(c)
        || matches!(c, '-' | '.' | '0'..='9' | '\u{B7}' | '\u{300}'..='\u{36F}' | '\u{203F}'..='\u{2040}')
}

impl<'t> Reader<'t> {
    fn rest(&self) -> &'t str {
        &self.text[self.at..]
    }

    fn fail<T>(&self, what: &'static str) -> Result<T, XmlError> {
        Err(XmlError { at: self.at, what })
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn eat(&mut self, prefix: &str) -> bool {
        let found = self.rest().starts_with(prefix);
        if found {
            self.at += prefix.len();
        }
        found
    }

    /// Skips whitespace; whether there was any.
    fn space(&mut self) -> bool {
        let before = self.at;
        let rest = self.rest();
        self.at += rest.len() - rest.trim_start_matches(is_xml_space).len();
        self.at > before
    }

    fn name(&mut self) -> Result<&'t str, XmlError> {
        let start = self.at;
        match self.peek() {
            Some(c) if is_name_start(c) => self.at += c.len_utf8(),
            _ => return self.fail("not well-formed (invalid token)"),
        }
        while let Some(c) = self.peek().filter(|&c| is_name_char(c)) {
            self.at += c.len_utf8();
        }
        Ok(&self.text[start..self.at])
    }

    /// Checks that `chars` are all XML characters.
    fn check_chars(&self, chars: &str) -> Result<(), XmlError> {
        if chars.chars().all(is_xml_char) {
            Ok(())
        } else {
            self.fail("not well-formed (invalid token)")
        }
    }

    /// Reads up to and past `terminator`, checking the characters before it.
    fn until(&mut self, terminator: &str) -> Result<&'t str, XmlError> {
        let Some(len) = self.rest().find(terminator) else {
            return self.fail("unclosed token");
        };
        let body = &self.rest()[..len];
        self.check_chars(body)?;
        self.at += len + terminator.len();
        Ok(body)
    }

    /// After `<!--`.
    fn comment(&mut self) -> Result<(), XmlError> {
        let body = self.until("-->")?;
        if body.contains("--") || body.ends_with('-') {
            return self.fail("not well-formed (invalid token)");
        }
        Ok(())
    }

    /// After `<?`.
    fn processing_instruction(&mut self) -> Result<(), XmlError> {
        let target = self.name()?;
        if target.eq_ignore_ascii_case("xml") {
            return self.fail("XML or text declaration not at start of entity");
        }
        if self.eat("?>") {
            return Ok(());
        }
        if !self.space() {
            return self.fail("not well-formed (invalid token)");
        }
        self.until("?>").map(drop)
    }

    /// Comments, processing instructions and whitespace (before and after the root).
    fn misc(&mut self) -> Result<(), XmlError> {
        loop {
            self.space();
            if self.eat("<!--") {
                self.comment()?;
            } else if self.eat("<?") {
                self.processing_instruction()?;
            } else {
                return Ok(());
            }
        }
    }

    /// After `&`: a character reference or one of the five predefined entities.
    fn reference(&mut self) -> Result<char, XmlError> {
        if self.eat("#") {
            let (radix, digits) = if self.eat("x") {
                (16, self.rest().find(|c: char| !c.is_ascii_hexdigit()))
            } else {
                (10, self.rest().find(|c: char| !c.is_ascii_digit()))
            };
            let len = digits.unwrap_or(self.rest().len());
            let value = &self.rest()[..len];
            self.at += len;
            if value.is_empty() || !self.eat(";") {
                return self.fail("not well-formed (invalid token)");
            }
            return match u32::from_str_radix(value, radix)
                .ok()
                .and_then(char::from_u32)
                .filter(|&c| is_xml_char(c))
            {
                Some(c) => Ok(c),
                None => self.fail("reference to invalid character number"),
            };
        }
        let name = self.name()?;
        if !self.eat(";") {
            return self.fail("not well-formed (invalid token)");
        }
        match name {
            "lt" => Ok('<'),
            "gt" => Ok('>'),
            "amp" => Ok('&'),
            "quot" => Ok('"'),
            "apos" => Ok('\''),
            _ => self.fail("undefined entity"),
        }
    }

    fn attribute_value(&mut self) -> Result<String, XmlError> {
        let quote = match self.peek() {
            Some(q @ ('"' | '\'')) => q,
            _ => return self.fail("not well-formed (invalid token)"),
        };
        self.at += 1;
        let mut value = String::new();
        loop {
            let Some(c) = self.peek() else {
                return self.fail("unclosed token");
            };
            self.at += c.len_utf8();
            match c {
                _ if c == quote => return Ok(value),
                '<' => return self.fail("not well-formed (invalid token)"),
                '&' => value.push(self.reference()?),
                '\r' => {
                    self.eat("\n");
                    value.push(' ');
                }
                '\t' | '\n' => value.push(' '),
                _ if is_xml_char(c) => value.push(c),
                _ => return self.fail("not well-formed (invalid token)"),
            }
        }
    }

    fn namespace(&self, prefix: &str) -> Option<&str> {
        if prefix == "xml" {
            return Some(XML_NAMESPACE);
        }
        self.bindings
            .iter()
            .rev()
            .find(|(bound, _)| *bound == prefix)
            .map(|(_, uri)| uri.as_str())
            .filter(|uri| !uri.is_empty())
    }

    /// ElementTree's name for a qualified name: `{uri}local`, or the name itself when it is in
    /// no namespace. `default` says whether the default namespace applies (elements, not
    /// attributes).
    fn resolve(&self, qname: &str, default: bool) -> Result<String, XmlError> {
        let (prefix, local) = match qname.split_once(':') {
            Some((prefix, local)) => (Some(prefix), local),
            None => (None, qname),
        };
        let uri = match prefix {
            Some(prefix) => match self.namespace(prefix) {
                Some(uri) => Some(uri),
                None => return self.fail("unbound prefix"),
            },
            None if default => self.namespace(""),
            None => None,
        };
        Ok(match uri {
            Some(uri) => format!("{{{uri}}}{local}"),
            None => local.to_owned(),
        })
    }

    /// After `<`: a start tag (or an empty-element tag).
    fn start_tag(&mut self) -> Result<(), XmlError> {
        let qname = self.name()?;
        let mut raw: Vec<(&'t str, String)> = Vec::new();
        let empty = loop {
            let spaced = self.space();
            if self.eat("/>") {
                break true;
            }
            if self.eat(">") {
                break false;
            }
            if self.peek().is_none() {
                return self.fail("unclosed token");
            }
            if !spaced {
                return self.fail("not well-formed (invalid token)");
            }
            let name = self.name()?;
            self.space();
            if !self.eat("=") {
                return self.fail("not well-formed (invalid token)");
            }
            self.space();
            let value = self.attribute_value()?;
            if raw.iter().any(|(seen, _)| *seen == name) {
                return self.fail("duplicate attribute");
            }
            raw.push((name, value));
        };
        let bindings_before = self.bindings.len();
        for (name, value) in &raw {
            if *name == "xmlns" {
                self.bindings.push(("", value.clone()));
            } else if let Some(prefix) = name.strip_prefix("xmlns:") {
                if value.is_empty() {
                    return self.fail("must not undeclare prefix");
                }
                self.bindings.push((prefix, value.clone()));
            }
        }
        let mut attributes: Vec<(String, String)> = Vec::new();
        for (name, value) in raw {
            if name == "xmlns" || name.starts_with("xmlns:") {
                continue;
            }
            let resolved = self.resolve(name, false)?;
            if attributes.iter().any(|(seen, _)| *seen == resolved) {
                return self.fail("duplicate attribute");
            }
            attributes.push((resolved, value));
        }
        let index = self.elements.len();
        self.elements.push(Element {
            name: self.resolve(qname, true)?,
            attributes,
            end: index + 1,
        });
        if empty {
            self.bindings.truncate(bindings_before);
        } else {
            self.open.push(Open {
                index,
                qname,
                bindings_before,
            });
        }
        Ok(())
    }

    /// After `</`.
    fn end_tag(&mut self) -> Result<(), XmlError> {
        let name = self.name()?;
        self.space();
        if !self.eat(">") {
            return self.fail("not well-formed (invalid token)");
        }
        let Some(open) = self.open.pop() else {
            return self.fail("not well-formed (invalid token)");
        };
        if open.qname != name {
            return self.fail("mismatched tag");
        }
        self.bindings.truncate(open.bindings_before);
        self.elements[open.index].end = self.elements.len();
        Ok(())
    }

    fn document(mut self) -> Result<Document, XmlError> {
        self.misc()?;
        if !self.eat("<") {
            return self.fail(if self.peek().is_none() {
                "no element found"
            } else {
                "syntax error"
            });
        }
        self.start_tag()?;
        while !self.open.is_empty() {
            let Some(c) = self.peek() else {
                return self.fail("no element found");
            };
            if self.eat("<!--") {
                self.comment()?;
            } else if self.eat("<![CDATA[") {
                self.until("]]>")?;
            } else if self.eat("<?") {
                self.processing_instruction()?;
            } else if self.eat("</") {
                self.end_tag()?;
            } else if self.eat("<!") {
                return self.fail("not well-formed (invalid token)");
            } else if self.eat("<") {
                self.start_tag()?;
            } else if self.eat("&") {
                self.reference()?;
            } else if self.rest().starts_with("]]>") || !is_xml_char(c) {
                return self.fail("not well-formed (invalid token)");
            } else {
                self.at += c.len_utf8();
            }
        }
        self.misc()?;
        if self.peek().is_some() {
            return self.fail("junk after document element");
        }
        Ok(Document {
            elements: self.elements,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_formed_documents() {
        let doc = parse(
            "<r a='1' b = \"x&amp;&#65;&#x42;\tz\r\ny\"><!-- c --><?pi x?><s><![CDATA[<&]]></s>text &lt;<t/></r>\n<!-- after -->",
        )
        .unwrap();
        assert_eq!(doc.attribute(0, "b"), Some("x&AB z y"));
        let names: Vec<_> = (0..doc.elements.len())
            .map(|at| doc.elements[at].name.as_str())
            .collect();
        assert_eq!(names, ["r", "s", "t"]);
        assert_eq!(doc.descendants_named(0, "t").collect::<Vec<_>>(), [2]);
        assert_eq!(doc.descendants_named(1, "t").count(), 0);
    }

    #[test]
    fn namespaces_resolve_like_elementtree() {
        let doc = parse(r#"<r xmlns="u" xmlns:p="v"><T p:name="a" name="b"/><p:T/></r>"#).unwrap();
        assert_eq!(doc.elements[1].name, "{u}T");
        assert_eq!(doc.elements[2].name, "{v}T");
        assert_eq!(doc.attribute(1, "name"), Some("b"));
        assert_eq!(doc.attribute(1, "{v}name"), Some("a"));
    }

    #[test]
    fn malformed_documents() {
        for text in [
            "",
            "<r>",
            "<r></s>",
            "<r/><s/>",
            "<r a='1'b='2'/>",
            "<r a='1' a='2'/>",
            "<r a='<'/>",
            "<r>&nbsp;</r>",
            "<r>&#0;</r>",
            "<r>]]></r>",
            "<r><!-- a -- b --></r>",
            "<r><?xml version='1.0'?></r>",
            "<r>\u{1}</r>",
            "<p:r/>",
            "<r a='1",
            "<r><!DOCTYPE r></r>",
            "text<r/>",
        ] {
            assert!(parse(text).is_err(), "{text:?}");
        }
    }
}
