use super::*;
use proptest::prelude::*;

fn no_defines() -> HashMap<String, String> {
    HashMap::new()
}

fn ok(src: &str) -> FlatConfig {
    parse(src, "t.click", &no_defines()).unwrap_or_else(|e| panic!("unexpected error:\n{}", e))
}

fn err(src: &str) -> ConfigError {
    match parse(src, "t.click", &no_defines()) {
        Ok(fc) => panic!("expected an error, got {:?}", fc),
        Err(e) => e,
    }
}

/// `file:line:column: error: message` of an error.
fn err_head(src: &str) -> String {
    err(src).to_string().lines().next().unwrap_or("").to_string()
}

/// (name, class, config) of every element.
fn elems(fc: &FlatConfig) -> Vec<(String, String, String)> {
    fc.elements
        .iter()
        .map(|e| (e.name.clone(), e.class.clone(), e.config.clone()))
        .collect()
}

fn e3(name: &str, class: &str, config: &str) -> (String, String, String) {
    (name.to_string(), class.to_string(), config.to_string())
}

/// Connections as "from[port] -> [port]to".
fn conns(fc: &FlatConfig) -> Vec<String> {
    fc.connections
        .iter()
        .map(|c| {
            format!(
                "{}[{}] -> [{}]{}",
                fc.elements[c.from].name, c.from_port, c.to_port, fc.elements[c.to].name
            )
        })
        .collect()
}

fn names(fc: &FlatConfig) -> Vec<&str> {
    fc.elements.iter().map(|e| e.name.as_str()).collect()
}

// ---- declarations and connections ----

#[test]
fn declarations_with_and_without_config() {
    let fc = ok("a :: Idle; b :: Queue(10);\nc :: Discard()");
    assert_eq!(
        elems(&fc),
        vec![
            e3("a", "Idle", ""),
            e3("b", "Queue", "10"),
            e3("c", "Discard", "")
        ]
    );
    assert!(fc.connections.is_empty());
}

#[test]
fn landmarks_of_name_and_class() {
    let fc = ok("// header\n  x :: Counter(1);\nIdle -> x -> Discard;");
    let x = fc.element_index("x").unwrap();
    let x_decl = &fc.elements[x];
    assert_eq!((x_decl.landmark.line, x_decl.landmark.column), (2, 3));
    assert_eq!((x_decl.class_landmark.line, x_decl.class_landmark.column), (2, 8));
    assert_eq!(&*x_decl.landmark.file, "t.click");
    assert_eq!(&*x_decl.landmark.source_line, "  x :: Counter(1);");
    let d = &fc.elements[fc.element_index("Discard@3").unwrap()];
    assert_eq!((d.landmark.line, d.landmark.column), (3, 14));
    assert_eq!((d.class_landmark.line, d.class_landmark.column), (3, 14));
    // a connection is located at its arrow
    let idle = fc.element_index("Idle@2").unwrap();
    let c = fc.connections.iter().find(|c| c.from == idle).unwrap();
    assert_eq!((c.landmark.line, c.landmark.column), (3, 6));
    let c = fc.connections.iter().find(|c| c.to != x).unwrap();
    assert_eq!((c.landmark.line, c.landmark.column), (3, 11));
}

#[test]
fn several_names_share_one_declaration() {
    let fc = ok("a, b, c :: Counter(5);");
    assert_eq!(
        elems(&fc),
        vec![
            e3("a", "Counter", "5"),
            e3("b", "Counter", "5"),
            e3("c", "Counter", "5")
        ]
    );
}

#[test]
fn anonymous_elements_are_numbered_by_position() {
    let fc = ok("FromDump(f.pcap) -> Counter -> Discard;");
    assert_eq!(
        elems(&fc),
        vec![
            e3("FromDump@1", "FromDump", "f.pcap"),
            e3("Counter@2", "Counter", ""),
            e3("Discard@3", "Discard", "")
        ]
    );
    assert_eq!(
        conns(&fc),
        vec!["FromDump@1[0] -> [0]Counter@2", "Counter@2[0] -> [0]Discard@3"]
    );
    // named elements take numbers too
    let fc = ok("a :: Idle; a -> Discard;");
    assert_eq!(names(&fc), vec!["a", "Discard@2"]);
    // a name the user took is skipped
    let fc = ok("Discard@3 :: Discard; Idle -> Discard;");
    assert_eq!(names(&fc), vec!["Discard@3", "Idle@2", "Discard@4"]);
}

#[test]
fn ports_on_both_sides_and_chains() {
    let fc = ok("c :: Classifier(12/0800, -);\nc [1] -> [2] d :: Mux -> Discard;\nc -> [1] d;");
    assert_eq!(
        conns(&fc),
        vec!["c[0] -> [1]d", "c[1] -> [2]d", "d[0] -> [0]Discard@3"]
    );
    let fc = ok("a :: Tee(2); b :: Idle; a [1] -> b [0] -> [0] c :: Discard");
    assert_eq!(conns(&fc), vec!["a[1] -> [0]b", "b[0] -> [0]c"]);
    // hexadecimal and octal ports, as Click's IntArg reads them
    let fc = ok("a :: Tee(20); a [0x10] -> [010] b :: Discard");
    assert_eq!(conns(&fc), vec!["a[16] -> [8]b"]);
}

#[test]
fn statements_need_no_separators() {
    let fc = ok("a :: Idle b :: Discard a -> b\nx :: Idle x -> Discard");
    assert_eq!(names(&fc), vec!["a", "b", "x", "Discard@4"]);
    assert_eq!(conns(&fc), vec!["a[0] -> [0]b", "x[0] -> [0]Discard@4"]);
}

#[test]
fn inline_declarations_in_chains() {
    let fc = ok("Idle -> x :: Counter -> y :: Queue(5) -> Discard; x [1] -> y;");
    assert_eq!(
        elems(&fc),
        vec![
            e3("Idle@1", "Idle", ""),
            e3("x", "Counter", ""),
            e3("y", "Queue", "5"),
            e3("Discard@4", "Discard", "")
        ]
    );
    assert_eq!(
        conns(&fc),
        vec![
            "Idle@1[0] -> [0]x",
            "x[0] -> [0]y",
            "x[1] -> [0]y",
            "y[0] -> [0]Discard@4"
        ]
    );
}

#[test]
fn element_lists_many_to_one_and_one_to_many() {
    let fc = ok("a, b :: Idle; c :: Discard; a, b -> c; t :: Tee(2); t [0], t [1] -> c; Idle -> a2 :: Counter, b2 :: Counter;");
    assert_eq!(
        conns(&fc),
        vec![
            "a[0] -> [0]c",
            "b[0] -> [0]c",
            "t[0] -> [0]c",
            "t[1] -> [0]c",
            "Idle@5[0] -> [0]a2",
            "Idle@5[0] -> [0]b2"
        ]
    );
    // in a list, `::` declares only the element it follows
    let fc = ok("x :: Idle; x, y :: Counter -> Discard;");
    assert_eq!(names(&fc), vec!["x", "y", "Discard@3"]);
}

#[test]
fn many_to_many_connections() {
    let expected = vec![
        "c[0] -> [0]Paint@2",
        "c[1] -> [0]Paint@3",
        "c[2] -> [0]Paint@4",
        "Paint@2[0] -> [0]d",
        "Paint@3[0] -> [0]d",
        "Paint@4[0] -> [0]d",
    ];
    let fc = ok("c :: Tee(3); c => Paint(0), Paint(1), Paint(2) -> d :: Discard;");
    assert_eq!(conns(&fc), expected);
    let fc = ok("c :: Tee(3); c [0,1,2] => Paint(0), Paint(1), Paint(2) -> d :: Discard;");
    assert_eq!(conns(&fc), expected);
    let fc = ok("c :: Tee(3); c [0, ] => Paint(0), Paint(1), Paint(2) -> d :: Discard;");
    assert_eq!(conns(&fc), expected);
    let fc = ok("c :: Tee(2); c [0, 1] -> d :: Discard;");
    assert_eq!(conns(&fc), vec!["c[0] -> [0]d", "c[1] -> [0]d"]);
}

#[test]
fn many_to_many_errors() {
    assert_eq!(
        err_head("t :: Tee(2);\nt [0,1] -> [0,1] d :: Mux;"),
        "t.click:2:9: error: syntax error: many-to-many connections require '=>'"
    );
    assert_eq!(
        err_head("t :: Tee(2);\nt [0,1] => Idle, Idle, Idle;"),
        "t.click:2:9: error: connection mismatch: 2 outputs connected to 3 inputs"
    );
}

#[test]
fn configuration_strings_are_raw() {
    let fc = ok("a :: Foo(x (y, z) \"q)\" 'r)' /* ) */ // )\n , $ok);");
    assert_eq!(fc.elements[0].config, "x (y, z) \"q)\" 'r)' /* ) */ // )\n , $ok");
    let fc = ok("a :: Foo(\"esc \\\" )\" ) -> Discard;");
    assert_eq!(fc.elements[0].config, "\"esc \\\" )\" ");
    let fc = ok("a :: Foo(\\<28 29>) -> Discard;");
    assert_eq!(fc.elements[0].config, "\\<28 29>");
}

#[test]
fn comments_between_tokens() {
    let fc = ok("a /* c1 -> */ :: // c2\n Idle; a -> /* x\n y */ Discard // end");
    assert_eq!(names(&fc), vec!["a", "Discard@2"]);
    assert_eq!(conns(&fc), vec!["a[0] -> [0]Discard@2"]);
    // a comment ends an identifier
    let fc = ok("a/b//c\n :: Idle;");
    assert_eq!(names(&fc), vec!["a/b"]);
}

#[test]
fn line_directives() {
    assert_eq!(
        err_head("# 10 \"other.click\"\nIdle -> a;"),
        "other.click:10:9: error: undeclared element 'a'"
    );
    assert_eq!(
        err_head("#line 5\n\nIdle -> a;"),
        "t.click:6:9: error: undeclared element 'a'"
    );
    assert_eq!(
        err_head("Idle\n#foo\n"),
        "t.click:2:1: error: unknown preprocessor directive"
    );
    // `#` elsewhere is an ordinary character
    assert_eq!(err_head("Idle #"), "t.click:1:6: error: syntax error near '#'");
}

// ---- compounds ----

#[test]
fn elementclass_expands_with_prefixed_names() {
    let fc = ok("elementclass Foo { input -> Counter -> output }\nsrc :: Idle;\nsrc -> f :: Foo -> Discard;");
    assert_eq!(
        elems(&fc),
        vec![
            e3("src", "Idle", ""),
            e3("Discard@3", "Discard", ""),
            e3("f/Counter@1", "Counter", "")
        ]
    );
    assert_eq!(
        conns(&fc),
        vec!["src[0] -> [0]f/Counter@1", "f/Counter@1[0] -> [0]Discard@3"]
    );
    let inner = &fc.elements[2];
    assert_eq!((inner.landmark.line, inner.landmark.column), (1, 29));
}

#[test]
fn anonymous_compound_elements() {
    let fc = ok("Idle -> { input -> Counter -> output } -> Discard;");
    assert_eq!(names(&fc), vec!["Idle@1", "Discard@3", "@2/Counter@1"]);
    assert_eq!(
        conns(&fc),
        vec!["Idle@1[0] -> [0]@2/Counter@1", "@2/Counter@1[0] -> [0]Discard@3"]
    );
    // as the class of a declaration
    let fc = ok("c :: { input -> x :: Counter -> output }; Idle -> c -> Discard;");
    assert_eq!(names(&fc), vec!["Idle@2", "Discard@3", "c/x"]);
}

#[test]
fn multi_port_compound() {
    let fc = ok(
        "compound :: {\n  input -> X -> output;\n  input [1] -> Y -> [1] output;\n};\n\
                 a, c :: Idle; b, d :: Discard;\na -> compound -> b;\nc -> [1] compound [1] -> d;",
    );
    assert_eq!(
        conns(&fc),
        vec![
            "a[0] -> [0]compound/X@1",
            "c[0] -> [0]compound/Y@2",
            "compound/X@1[0] -> [0]b",
            "compound/Y@2[0] -> [0]d"
        ]
    );
}

#[test]
fn compound_input_wired_to_output() {
    let fc = ok("elementclass P { input -> output }\nIdle -> P -> Discard;");
    assert_eq!(names(&fc), vec!["Idle@1", "Discard@3"]);
    assert_eq!(conns(&fc), vec!["Idle@1[0] -> [0]Discard@3"]);
    // through two levels
    let fc = ok(
        "elementclass P { input -> output }\nelementclass Q { input -> P -> output }\nIdle -> Q -> Discard;",
    );
    assert_eq!(conns(&fc), vec!["Idle@1[0] -> [0]Discard@3"]);
}

#[test]
fn compound_ports_fan_out_and_in() {
    let fc = ok(
        "elementclass T { a :: A; b :: B; input -> a; input -> b; a, b -> output }\nIdle -> T -> Discard;",
    );
    assert_eq!(names(&fc), vec!["Idle@1", "Discard@3", "T@2/a", "T@2/b"]);
    assert_eq!(
        conns(&fc),
        vec![
            "Idle@1[0] -> [0]T@2/a",
            "Idle@1[0] -> [0]T@2/b",
            "T@2/a[0] -> [0]Discard@3",
            "T@2/b[0] -> [0]Discard@3"
        ]
    );
}

#[test]
fn implicit_input_and_output_in_compounds() {
    let fc = ok("elementclass X { -> Counter -> }\nIdle -> X -> Discard;");
    assert_eq!(names(&fc), vec!["Idle@1", "Discard@3", "X@2/Counter@1"]);
    assert_eq!(
        conns(&fc),
        vec![
            "Idle@1[0] -> [0]X@2/Counter@1",
            "X@2/Counter@1[0] -> [0]Discard@3"
        ]
    );
    let fc = ok("elementclass Y { [1] -> B -> [1]; -> A -> }\n\
                 i0, i1 :: Idle; d0, d1 :: Discard;\ni0 -> y :: Y -> d0; i1 -> [1] y [1] -> d1;");
    assert_eq!(
        conns(&fc),
        vec![
            "i0[0] -> [0]y/A@2",
            "i1[0] -> [0]y/B@1",
            "y/B@1[0] -> [0]d1",
            "y/A@2[0] -> [0]d0"
        ]
    );
}

#[test]
fn compound_formal_parameters() {
    let fc = ok("elementclass Sh { $rate, BURST $b, __REST__ $rest |\n  input -> Shaper($rate, $b) -> Print($rest) -> output }\n\
                 Idle -> s :: Sh(10, X 1, BURST 5, Y 2) -> Discard;");
    assert_eq!(
        elems(&fc),
        vec![
            e3("Idle@1", "Idle", ""),
            e3("Discard@3", "Discard", ""),
            e3("s/Shaper@1", "Shaper", "10, 5"),
            e3("s/Print@2", "Print", "X 1, Y 2")
        ]
    );
    let fc = ok("elementclass C { $a, $b | input -> A($b $a) -> output }\nIdle -> C(1, 2) -> Discard;");
    assert_eq!(e3("C@2/A@1", "A", "2 1"), elems(&fc)[2]);
}

#[test]
fn compound_argument_mismatch() {
    let e = err("elementclass Sh { $rate, BURST $b | input -> Shaper($rate, $b) -> output }\nIdle -> s :: Sh(10) -> Discard;");
    assert_eq!(
        e.to_string().lines().next().unwrap(),
        "t.click:2:9: error: no match for 'Sh[1 argument, 1 input, 1 output]'"
    );
    assert_eq!(
        e.hint.as_deref(),
        Some("candidates are: Sh(<arg>, BURST)[1 input, 1 output] (at t.click:1:17)")
    );
    assert_eq!(
        err_head("elementclass C { $a, $b | input -> output }\nIdle -> C(1) -> Discard;"),
        "t.click:2:9: error: no match for 'C[1 argument, 1 input, 1 output]'"
    );
}

#[test]
fn nested_elementclasses_scope_and_variables() {
    let fc = ok("elementclass Outer { $v |\n  elementclass In { input -> P($v) -> output }\n  input -> In -> output }\n\
                 Idle -> o :: Outer(7) -> Discard;");
    assert_eq!(names(&fc), vec!["Idle@1", "Discard@3", "o/In@1/P@1"]);
    assert_eq!(fc.elements[2].config, "7");
    // the inner class is not visible outside
    let classes = |n: &str| ["Idle", "Discard", "P"].contains(&n);
    let e = parse_with_classes(
        "elementclass O { elementclass I { input -> output } input -> I -> output }\nIdle -> I -> Discard;",
        "t.click",
        &no_defines(),
        &classes,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string().lines().next().unwrap(),
        "t.click:2:9: error: undeclared element 'I'"
    );
    // an elementclass refers to the class of the same name defined before it
    let fc = ok("elementclass Queue { input -> Queue -> Shaper(1000) -> output }\nIdle -> Queue -> Discard;");
    assert_eq!(
        elems(&fc)[2..],
        [
            e3("Queue@2/Queue@1", "Queue", ""),
            e3("Queue@2/Shaper@2", "Shaper", "1000")
        ]
    );
}

#[test]
fn elementclass_synonyms() {
    let fc = ok("elementclass MyQ Queue;\nIdle -> MyQ(5) -> Discard;");
    assert_eq!(elems(&fc)[1], e3("MyQ@2", "Queue", "5"));
    let fc =
        ok("elementclass Wrap { input -> Counter -> output }\nelementclass W2 Wrap;\nIdle -> W2 -> Discard;");
    assert_eq!(names(&fc), vec!["Idle@1", "Discard@3", "W2@2/Counter@1"]);
}

#[test]
fn overloaded_compounds() {
    let fc = ok(
        "elementclass F { input -> A -> output || $x | input -> B($x) -> output }\n\
                 Idle -> F -> Discard; Idle -> F(9) -> Discard;",
    );
    assert_eq!(elems(&fc)[4..], [e3("F@2/A@1", "A", ""), e3("F@5/B@1", "B", "9")]);
    // overloads chosen by the number of ports used
    let fc = ok(
        "elementclass G { input -> A -> output || input -> B -> output; input [1] -> C -> [1] output }\n\
                 x, y :: G; i :: Idle; d :: Discard;\ni -> x -> d; i -> y -> d; i -> [1] y [1] -> d;",
    );
    assert_eq!(names(&fc), vec!["i", "d", "x/A@1", "y/B@1", "y/C@2"]);
    // `...` extends the previous definition, here a primitive class
    let fc = ok(
        "elementclass Queue { $cap, $rate | input -> Queue($cap) -> Shaper($rate) -> output || ... }\n\
                 Idle -> Queue(5) -> Discard; Idle -> Queue(5, 10) -> Discard;",
    );
    assert_eq!(
        elems(&fc),
        vec![
            e3("Idle@1", "Idle", ""),
            e3("Queue@2", "Queue", "5"),
            e3("Discard@3", "Discard", ""),
            e3("Idle@4", "Idle", ""),
            e3("Discard@6", "Discard", ""),
            e3("Queue@5/Queue@1", "Queue", "5"),
            e3("Queue@5/Shaper@2", "Shaper", "10")
        ]
    );
    let e = err("elementclass F { input -> A -> output || $x | input -> B($x) -> output }\nIdle -> F(1, 2) -> Discard;");
    assert_eq!(
        e.to_string().lines().next().unwrap(),
        "t.click:2:9: error: no match for 'F[2 arguments, 1 input, 1 output]'"
    );
    assert_eq!(
        e.hint.as_deref(),
        Some("candidates are: F[1 input, 1 output] (at t.click:1:16), F(<arg>)[1 input, 1 output] (at t.click:1:39)")
    );
}

#[test]
fn element_groups() {
    let fc = ok("Idle -> ( input -> Counter -> output ) -> Discard;");
    assert_eq!(names(&fc), vec!["Idle@1", "Counter@5", "Discard@6"]);
    assert_eq!(
        conns(&fc),
        vec!["Idle@1[0] -> [0]Counter@5", "Counter@5[0] -> [0]Discard@6"]
    );
    let fc = ok("Idle -> (->) -> Discard;");
    assert_eq!(conns(&fc), vec!["Idle@1[0] -> [0]Discard@5"]);
    // groups have implied ports; declarations inside are visible after
    let fc = ok(
        "c :: Tee(2); y :: Discard;\nc => ( [0] -> [0]; [1] -> p :: Paint(1) -> [1] ) => y;\np -> Discard;",
    );
    assert_eq!(
        conns(&fc),
        vec![
            "c[0] -> [0]y",
            "c[1] -> [0]p",
            "p[0] -> [1]y",
            "p[0] -> [0]Discard@7"
        ]
    );
}

#[test]
fn group_errors() {
    assert_eq!(
        err_head("x :: Tee(2); y :: Discard;\nx => ( [0] -> [0]; [2] -> Idle ) -> y;"),
        "t.click:2:32: error: '<anonymous group>' input 1 missing"
    );
    assert_eq!(
        err_head("Idle -> ( input -> Discard "),
        "t.click:1:28: error: expected ')'"
    );
    assert_eq!(
        err_head("Idle -> Discard )"),
        "t.click:1:17: error: syntax error near ')'"
    );
}

// ---- variables ----

#[test]
fn define_and_substitution() {
    let src = "define($DEV eth0, $N 3, $Q 'a\"b');\n\
               FromDevice($DEV) -> Queue($N) -> Print(\"dev $DEV $Q\") -> Print('dev $DEV')\n\
               -> Print(${DEV}x, ${NOPE-dflt}, $NOPE /* $DEV */) -> Discard;";
    let fc = ok(src);
    let configs: Vec<&str> = fc.elements.iter().map(|e| e.config.as_str()).collect();
    assert_eq!(
        configs,
        vec![
            "eth0",
            "3",
            "\"dev eth0 'a\\\"b'\"",
            "'dev $DEV'",
            "eth0x, dflt, $NOPE /* $DEV */",
            ""
        ]
    );
    // command-line definitions override the file's
    let mut defines = HashMap::new();
    defines.insert("DEV".to_string(), "eth1".to_string());
    defines.insert("EXTRA".to_string(), "9".to_string());
    let fc = parse(
        "define($DEV eth0); FromDevice($DEV, $EXTRA) -> Discard;",
        "t.click",
        &defines,
    )
    .unwrap();
    assert_eq!(fc.elements[0].config, "eth1, 9");
    // all definitions of a scope take effect together
    let fc = ok("Print($a) -> Discard; define($a 2)");
    assert_eq!(fc.elements[0].config, "2");
}

/// The configuration string of the first element of `src`.
fn first_config(src: &str) -> String {
    ok(src).elements[0].config.clone()
}

#[test]
fn variable_values_are_expanded_in_turn() {
    assert_eq!(first_config("define($a 1, $b $a); Print($b) -> Discard;"), "1");
    assert_eq!(
        first_config("define($a 1, $b <$a>, $c $b$b); Print($c) -> Discard;"),
        "<1><1>"
    );
    // A value defined in terms of itself stops expanding at Click's depth limit: the
    // value is expanded at depths 1 to 10, each adding one x, and left as is at 11.
    assert_eq!(
        first_config("define($a x$a); Print($a) -> Discard;"),
        format!("{}$a", "x".repeat(11))
    );
    // In double quotes the expanded value is quoted.
    assert_eq!(
        first_config("define($a \"q\", $b $a); Print(\"[$b]\") -> Discard;"),
        "\"[\\\"q\\\"]\""
    );
}

#[test]
fn braced_variables_take_defaults_words_and_variable_names() {
    assert_eq!(first_config("define($Y 7); Print(${X-$Y}) -> Discard;"), "7");
    assert_eq!(first_config("Print(${X-$Y}) -> Discard;"), "$Y");
    assert_eq!(
        first_config("define($X a b c); Print(${X[1]}, ${X[0]}, ${ X [2] }, ${X[3]}, ${X[9]-d}) -> Discard;"),
        "b, a, c, , "
    );
    assert_eq!(first_config("Print(${X[1]-d}) -> Discard;"), "d");
    assert_eq!(first_config("define($n X, $X 5); Print(${$n}) -> Discard;"), "5");
    // An expanded name that is undefined is left expanded.
    assert_eq!(
        first_config("define($n Z); Print(${$n}, $(x$n)) -> Discard;"),
        "${Z}, $(xZ)"
    );
    // `$$` is a variable name of its own, undefined here.
    assert_eq!(first_config("define($X 1); Print($$X) -> Discard;"), "$$X");
}

#[test]
fn variables_in_compounds_are_lexically_scoped() {
    let fc = ok(
        "define($x outer);\nelementclass C { $x | input -> A($x) -> output }\n\
                 elementclass D { input -> B($x) -> output }\nIdle -> C(inner) -> D -> Discard;",
    );
    let configs: Vec<(&str, &str)> = fc
        .elements
        .iter()
        .map(|e| (e.name.as_str(), e.config.as_str()))
        .collect();
    assert_eq!(
        configs,
        vec![
            ("Idle@1", ""),
            ("Discard@4", ""),
            ("C@2/A@1", "inner"),
            ("D@3/B@1", "outer")
        ]
    );
    // define inside a compound, using a formal
    let fc =
        ok("elementclass C { $a | define($b $a.$a); input -> A($b) -> output }\nIdle -> C(x) -> Discard;");
    assert_eq!(fc.elements[2].config, "x.x");
}

#[test]
fn define_errors() {
    assert_eq!(
        err_head("define($a 1, $a 2);"),
        "t.click:1:8: error: parameter '$a' multiply defined"
    );
    assert_eq!(
        err_head("define(a 1);"),
        "t.click:1:8: error: bad 'define' declaration: not a variable"
    );
    assert_eq!(err_head("define $a 1"), "t.click:1:8: error: expected '('");
}

#[test]
fn formal_parameter_errors() {
    assert_eq!(
        err_head("elementclass X { $a $b | }"),
        "t.click:1:21: error: expected ',' or '|'"
    );
    assert_eq!(
        err_head("elementclass X { K $a, $b | }"),
        "t.click:1:24: error: compound element parameters out of order"
    );
    assert_eq!(
        err_head("elementclass X { K $a, K $b | }"),
        "t.click:1:24: error: repeated keyword parameter 'K' in compound element"
    );
    assert_eq!(
        err_head("elementclass X { $a, $a | }"),
        "t.click:1:22: error: parameter '$a' multiply defined"
    );
}

// ---- require ----

#[test]
fn requirements_are_recorded() {
    let fc = ok("require(userlevel, package \"ip6\", compact_config, int64);\nIdle -> Discard;");
    assert_eq!(
        fc.requirements,
        vec![
            "userlevel".to_string(),
            "package \"ip6\"".to_string(),
            "compact_config".to_string(),
            "int64".to_string()
        ]
    );
    assert_eq!(
        err_head("require(package);"),
        "t.click:1:9: error: syntax error at requirement"
    );
    assert_eq!(
        err_head("require(library lib.click);"),
        "t.click:1:9: error: 'require(library ...)' is not supported"
    );
}

#[test]
fn requirements_brickroute_does_not_provide_fail_as_in_click() {
    assert_eq!(
        err_head("Idle -> Discard;\n  require(unknownpkg);"),
        "t.click:2:11: error: requirement 'unknownpkg' not available"
    );
    assert_eq!(
        err_head("require(ip6, package \"fastclassifier\")"),
        "t.click:1:9: error: requirement 'fastclassifier' not available"
    );
    assert_eq!(
        err_head("elementclass C { require(linuxmodule); input -> output }"),
        "t.click:1:26: error: requirement 'linuxmodule' not available"
    );
}

// ---- configuration bytes ----

#[test]
fn bytes_that_are_not_utf8_are_accepted_in_comments_only() {
    let text = source_text(
        b"// caf\xe9\nIdle /* \xff\xfe */ -> Print(\"//x\") -> Discard; // \xe9",
        "t.click",
    )
    .unwrap();
    let fc = parse(&text, "t.click", &no_defines()).unwrap();
    assert_eq!(
        elems(&fc),
        vec![
            e3("Idle@1", "Idle", ""),
            e3("Print@2", "Print", "\"//x\""),
            e3("Discard@3", "Discard", "")
        ]
    );

    let e = source_text(
        b"Idle -> /* \xff */ Discard;\nPrint(\"caf\xe9\") -> Discard;",
        "t.click",
    )
    .unwrap_err();
    assert_eq!(
        e.to_string().lines().next().unwrap(),
        "t.click:2:11: error: byte 0xE9 is not UTF-8 (configurations are read as UTF-8; other bytes may appear only in comments)"
    );
    // `//` inside a string does not start a comment.
    let e = source_text(b"Print(\"http://\xe9\") -> Discard;", "t.click").unwrap_err();
    assert_eq!(e.landmark.unwrap().column, 15);
}

// ---- errors ----

#[test]
fn undeclared_element() {
    let e = err("a :: Idle;\na -> b;");
    assert_eq!(
        e.to_string(),
        "t.click:2:6: error: undeclared element 'b'\n  a -> b;\n       ^"
    );
    // with the class set, a bare unknown name is undeclared whatever its case
    let classes = |n: &str| n == "Idle";
    let e = parse_with_classes("Idle -> Discrad;", "t.click", &no_defines(), &classes).unwrap_err();
    assert_eq!(
        e.to_string().lines().next().unwrap(),
        "t.click:1:9: error: undeclared element 'Discrad'"
    );
    let fc = parse_with_classes("Idle -> x :: Queue -> Idle;", "t.click", &no_defines(), &classes).unwrap();
    assert_eq!(names(&fc), vec!["Idle@1", "x", "Idle@3"]);
}

#[test]
fn redeclaration() {
    let e = err("a :: Idle;\n  a :: Discard;");
    assert_eq!(
        e.to_string().lines().next().unwrap(),
        "t.click:2:3: error: redeclaration of element 'a'"
    );
    assert_eq!(
        e.hint.as_deref(),
        Some("element 'a' previously declared at t.click:1:1")
    );
    let classes = |n: &str| n == "Idle" || n == "Discard";
    let e = parse_with_classes("Discard :: Idle;", "t.click", &no_defines(), &classes).unwrap_err();
    assert_eq!(
        e.to_string().lines().next().unwrap(),
        "t.click:1:1: error: class 'Discard' used as element name"
    );
    assert_eq!(
        err_head("elementclass X { input :: Idle }"),
        "t.click:1:18: error: redeclaration of element 'input'"
    );
}

#[test]
fn syntax_errors_at_the_token() {
    assert_eq!(
        err_head("a :: Idle;\na -> ;"),
        "t.click:2:6: error: syntax error near ';'"
    );
    assert_eq!(
        err_head("Idle -> -> Discard"),
        "t.click:1:9: error: syntax error near '->'"
    );
    assert_eq!(
        err_head("Idle ->"),
        "t.click:1:8: error: syntax error near end of file"
    );
    assert_eq!(
        err_head("a :: Idle; a -> b :: Discard :: X"),
        "t.click:1:30: error: syntax error near '::'"
    );
    // as in Click, a token after a trailing comma is skipped
    assert_eq!(
        names(&ok("Idle -> Discard, :: Idle")),
        vec!["Idle@1", "Discard@2", "Idle@3"]
    );
    assert_eq!(
        err_head("x :: ;"),
        "t.click:1:6: error: missing element type in declaration"
    );
    assert_eq!(err_head("Idle é"), "t.click:1:6: error: syntax error near 'é'");
    assert_eq!(
        err_head("provide(x);"),
        "t.click:1:1: error: syntax error near 'provide'"
    );
    assert_eq!(
        err_head("elementclass { }"),
        "t.click:1:14: error: expected element type name"
    );
}

#[test]
fn unterminated_constructs() {
    let e = err("a :: Foo(1, (2)");
    assert_eq!(
        e.to_string().lines().next().unwrap(),
        "t.click:1:16: error: expected ')'"
    );
    assert_eq!(
        e.hint.as_deref(),
        Some("the configuration string opened at t.click:1:9 is not closed")
    );
    assert_eq!(
        err_head("elementclass X {\n input -> output"),
        "t.click:2:17: error: expected '}'"
    );
    // an unterminated comment or quote runs to the end
    assert_eq!(err_head("a :: Foo(\"x)\n"), "t.click:2:1: error: expected ')'");
    let fc = ok("Idle -> Discard /* unterminated");
    assert_eq!(fc.elements.len(), 2);
}

#[test]
fn port_errors() {
    assert_eq!(
        err_head("Idle [x] -> Discard"),
        "t.click:1:7: error: syntax error: port number should be integer"
    );
    assert_eq!(
        err_head("Idle [-] -> Discard"),
        "t.click:1:7: error: syntax error: expected port number"
    );
    assert_eq!(
        err_head("Idle [0 1] -> Discard"),
        "t.click:1:9: error: syntax error: expected ','"
    );
    assert_eq!(
        err_head("a :: Idle; a -> [1];"),
        "t.click:1:20: error: stranded port ignored"
    );
    assert_eq!(
        err_head("a :: Idle; a [1];"),
        "t.click:1:12: error: output ports ignored at end of chain"
    );
    assert_eq!(
        err_head("a :: Idle; [1] a;"),
        "t.click:1:16: error: input ports ignored at start of chain"
    );
}

#[test]
fn other_element_errors() {
    assert_eq!(
        err_head("0 :: Idle;"),
        "t.click:1:1: error: element name '0' has all-digit component"
    );
    assert_eq!(
        err_head("a :: Idle; a(5) -> Discard;"),
        "t.click:1:13: error: configuration string ignored on element reference"
    );
    assert_eq!(
        err_head("elementclass Q { ... }"),
        "t.click:1:18: error: '...' should occur last, after one or more compounds"
    );
}

#[test]
fn pseudoelement_errors() {
    assert_eq!(
        err_head("elementclass X { output -> input }"),
        "t.click:1:16: error: 'X' pseudoelement 'input' may only be used as output"
    );
    assert_eq!(
        err_head("elementclass X { input -> output; output -> Discard }"),
        "t.click:1:16: error: 'X' pseudoelement 'output' may only be used as input"
    );
    assert_eq!(
        err_head("elementclass X { input [1] -> A -> output }"),
        "t.click:1:16: error: 'X' input 0 missing"
    );
    assert_eq!(
        err_head("Idle -> { input -> A -> [2] output } -> Discard"),
        "t.click:1:9: error: '<anonymous>' output 0 missing"
    );
}

#[test]
fn compound_ports_that_lead_nowhere() {
    assert_eq!(
        err_head("elementclass C { input -> A -> output }\nIdle -> C;"),
        "t.click:2:9: error: 'C@2' output 0 unused"
    );
    assert_eq!(
        err_head("elementclass C { input -> A -> output }\nC -> Discard;"),
        "t.click:2:1: error: 'C@1' input 0 unused"
    );
    assert_eq!(
        err_head("elementclass C { input -> A -> output }\nIdle -> [1] C -> Discard;"),
        "t.click:2:13: error: 'C@2' has no input 1"
    );
    assert_eq!(
        err_head("elementclass C { input -> A -> output }\nIdle -> c :: C [1] -> Discard;"),
        "t.click:2:9: error: 'c' has no output 1"
    );
}

#[test]
fn expansion_limits_are_errors_not_crashes() {
    // each class doubles the previous: 2^20 elements
    let mut src = String::from("elementclass C0 { input -> Counter -> output }\n");
    for i in 1..=20 {
        src.push_str(&format!(
            "elementclass C{} {{ input -> C{} -> C{} -> output }}\n",
            i,
            i - 1,
            i - 1
        ));
    }
    src.push_str("Idle -> C20 -> Discard;");
    let e = err(&src);
    assert!(
        e.message
            .starts_with("too many elements after compound expansion"),
        "{}",
        e
    );
    // deep nesting is refused before the stack runs out
    let deep = format!(
        "Idle -> {}{} -> Discard",
        "{ input -> ".repeat(200),
        "output }".repeat(200)
    );
    assert!(err(&deep)
        .message
        .contains("maximum compound element nesting depth exceeded"));
    let deep = format!("Idle -> {}{} -> Discard", "( ".repeat(200), ")".repeat(200));
    assert!(err(&deep)
        .message
        .contains("maximum element group nesting depth exceeded"));
}

#[test]
fn long_chains_of_classes_expand_without_recursion() {
    let mut src = String::from("elementclass C0 { input -> Counter -> output }\n");
    for i in 1..=3000 {
        src.push_str(&format!(
            "elementclass C{} {{ input -> C{} -> output }}\n",
            i,
            i - 1
        ));
    }
    src.push_str("Idle -> C3000 -> Discard;");
    let fc = ok(&src);
    assert_eq!(fc.elements.len(), 3);
    assert_eq!(fc.connections.len(), 2);
}

#[test]
fn error_display_with_caret() {
    let e = err("x :: Idle;\n\tx -> y;");
    assert_eq!(
        e.to_string(),
        "t.click:2:7: error: undeclared element 'y'\n  \tx -> y;\n  \t     ^"
    );
}

const PIECES: &[&str] = &[
    "a",
    "b",
    "Idle",
    "Discard",
    "x",
    "input",
    "output",
    "->",
    "=>",
    "::",
    ",",
    ";",
    "[",
    "]",
    "0",
    "1",
    "(",
    ")",
    "{",
    "}",
    "|",
    "||",
    "...",
    "$a",
    "elementclass",
    "define",
    "require",
    "C",
    "\"",
    "'",
    "/*",
    "*/",
    "//",
    "\n",
    "#",
    "# 3 \"f\"\n",
    "$a |",
    "{ input -> output }",
    "elementclass C",
    "(1, 2)",
    "[0,]",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,200}") {
        let _ = parse(&s, "t.click", &HashMap::new());
    }

    #[test]
    fn arbitrary_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..200)) {
        let s = String::from_utf8_lossy(&b);
        let _ = parse(&s, "t.click", &HashMap::new());
    }

    #[test]
    fn token_soup_never_panics(parts in prop::collection::vec(prop::sample::select(PIECES), 0..60)) {
        let s = parts.join(" ");
        if let Err(e) = parse(&s, "t.click", &HashMap::new()) {
            let _ = e.to_string();
        }
        let _ = parse(&parts.concat(), "t.click", &HashMap::new());
    }
}
