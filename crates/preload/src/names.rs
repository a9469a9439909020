//! Row names for C and C++ call sites.

/// The qualified name in a GCC/Clang `__PRETTY_FUNCTION__`, without its return type,
/// parameters, qualifiers and template notes: `int ns::Parser::parse(const char*) const`
/// → `ns::Parser::parse`, `std::vector<int> f<int>(T) [with T = int]` → `f<int>`. A plain C
/// name (`__func__`) comes back as it is.
pub(crate) fn function_name(pretty: &str) -> &str {
    let s = pretty.trim();
    // The parameter list: the first '(' outside template brackets, except the one in
    // `operator()` (and the '<' of `operator<`, `operator<<`, `operator<=`).
    let bytes = s.as_bytes();
    let mut depth = 0i32;
    let mut end = s.len();
    let mut i = 0;
    while i < bytes.len() {
        if s[i..].starts_with("operator") {
            let rest = &s[i + 8..];
            let op = [
                "()", "<<=", "<=>", "<<", "<=", "<", ">>=", ">>", ">=", ">", "->",
            ]
            .iter()
            .find(|op| rest.trim_start().starts_with(**op));
            let skip = rest.len() - rest.trim_start().len() + op.map_or(0, |o| o.len());
            i += 8 + skip;
            continue;
        }
        match bytes[i] {
            b'<' => depth += 1,
            b'>' => depth -= 1,
            b'(' if depth == 0 => {
                end = i;
                break;
            }
            _ => {}
        }
        i += 1;
    }
    let head = s[..end].trim_end();
    // The return type ends at the last space outside template brackets.
    let mut depth = 0i32;
    let mut start = 0;
    for (i, b) in head.bytes().enumerate() {
        match b {
            b'<' => depth += 1,
            b'>' => depth -= 1,
            b' ' if depth == 0 => start = i + 1,
            _ => {}
        }
    }
    // `operator <` and the like keep their space; a pointer or reference return type
    // (`char* f()`, `T& g()`) leaves its marker in front.
    let name = match head[..start].trim_end().rsplit(' ').next() {
        Some(prev) if prev.ends_with("operator") => &head[start - 1 - prev.len()..],
        _ => &head[start..],
    };
    let name = name.trim_start_matches(['*', '&']);
    if name.is_empty() {
        s
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::function_name;

    #[test]
    fn pretty_function_names_lose_return_type_parameters_and_notes() {
        for (pretty, name) in [
            ("main", "main"),
            ("int main()", "main"),
            ("void work(int)", "work"),
            (
                "int ns::Parser::parse(const char*) const",
                "ns::Parser::parse",
            ),
            ("ns::Parser::Parser(int)", "ns::Parser::Parser"),
            ("ns::Parser::~Parser()", "ns::Parser::~Parser"),
            (
                "std::vector<int, std::allocator<int> > make<int>(T) [with T = int]",
                "make<int>",
            ),
            ("char* dup(const char*)", "dup"),
            (
                "const T& Box<T>::get() const [with T = double]",
                "Box<T>::get",
            ),
            ("bool Key::operator<(const Key&) const", "Key::operator<"),
            ("void Fn::operator()(int)", "Fn::operator()"),
            ("Out& operator<<(Out&, int)", "operator<<"),
            ("static void Pool::alloc(std::size_t)", "Pool::alloc"),
            ("auto lambda()::<lambda(int)>", "lambda"),
        ] {
            assert_eq!(function_name(pretty), name, "{pretty}");
        }
    }
}
