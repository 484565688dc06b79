import Foundation

/// One fuzz target: a family of parsers of untrusted bytes (docs/fuzzing.md).
///
/// `run` hands the input to every parser of the family. A finding is a crash, a sanitizer report, or an error
/// that is not the module's own typed error (``expectOnly(_:_:_:)``); a parser that accepts its input is also
/// checked where it can be (an accepted frame encodes back to the same bytes).
struct FuzzTarget: Sendable {
    let name: String
    let summary: String
    /// The longest input worth trying (libFuzzer's `-max_len`): past it only the parsers' length limits run, and
    /// the corpus stays small.
    let maximumLength: Int
    /// Valid inputs made with the modules' own encoders, as the tests make them: the corpus starts from these.
    let seeds: @Sendable () throws -> [Data]
    let run: @Sendable (Data) -> Void
}

/// Every target, by name.
let targets: [FuzzTarget] = [
    ageTarget, relayFrameTarget, certTarget, transparencyTarget, webAuthnTarget, tokensTarget, fieldsTarget,
    sempereTarget, deviceWireTarget, webSocketTarget, webSocketUpgradeTarget, snapshotTarget, apiJSONTarget,
    reconcileTarget,
]

/// Runs `body`; an error other than an `E` is a finding.
func expectOnly<E: Error>(_ type: E.Type, _ what: String, _ body: () throws -> Void) {
    do {
        try body()
    } catch is E {
        // A refusal with a reason: what a parser should do with garbage.
    } catch {
        finding("\(what) threw \(Swift.type(of: error)), not \(E.self): \(error)")
    }
}

/// A property the parser broke: the input is kept by libFuzzer as a crash.
func finding(_ what: String) -> Never {
    fatalError("fuzz finding: \(what)")
}

/// Checks that an accepted input encodes back to the same bytes (a parser with one encoding per value).
func expectRoundTrip(_ input: Data, _ encoded: Data, _ what: String) {
    guard encoded == input else { finding("\(what) accepted bytes it does not encode back the same way") }
}
