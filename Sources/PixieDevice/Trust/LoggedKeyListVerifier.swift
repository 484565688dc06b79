import Foundation
import PrivacyPass
import Transparency

/// The device's check of the served OPRF key list against the key-transparency log, the verifier the token
/// mint takes (000_e422bd9a7c930342.txt, SignInApprovalRequester: a pre-session mint on a new device is "the one
/// moment with no prior state to contradict the server", so a per-user key would tag the device "from birth").
///
/// Each check asks identity-svc for the lookup proof of label `oprf-keys` (``KeyList/logLabel``), verifies it
/// with the device's ``TransparencyVerifier`` (pinned checkpoint, consistency from it, current value), and
/// accepts the served list only if it is byte for byte the logged value. It fails closed: no proof, a proof that
/// fails, a log without a key list, or a served list that differs are all errors, and nothing is minted.
///
/// The pinned checkpoint only ever moves forward through a proven consistency.
public actor LoggedKeyListVerifier: KeyListVerifier {
    /// Fetches identity-svc's answer for `label` (`POST /v1/kt/lookup`), with a consistency proof from the
    /// checkpoint of size `since` when the device has one pinned; nil when the server gave no answer.
    public typealias Lookup = @Sendable (_ label: Label, _ since: UInt64?) async throws -> LookupAnswer?

    private var verifier: TransparencyVerifier
    private let lookup: Lookup

    /// `verifier` carries the device's pinned checkpoint (restore it from ``state`` across launches).
    public init(verifier: TransparencyVerifier, lookup: @escaping Lookup) {
        self.verifier = verifier
        self.lookup = lookup
    }

    /// The pinned checkpoint, for the device to keep (``TransparencyVerifier/init(logKey:state:)``).
    public var state: Data { verifier.state }

    public func loggedKeyList(matching served: Data) async throws -> KeyList {
        let label = try Label(KeyList.logLabel)
        var entry: Entry?
        var answered = false
        // A check that ran while this one waited for the network may have moved the pin; the consistency
        // proof asked for is then from the wrong size, so ask again from the new one.
        for _ in 0..<3 where !answered {
            let since = verifier.pinned?.size
            let answer = try await lookup(label, since)
            guard verifier.pinned?.size == since else { continue }
            entry = try verifier.verify(label: label, answer: answer)
            answered = true
        }
        guard answered else {
            throw TransparencyError(
                .missingProof, "the key list's proof kept arriving for an older checkpoint; try again")
        }
        guard let entry else {
            throw PrivacyPassError(
                .keyNotInList,
                "the transparency log proves it holds no OPRF key list, so the served one cannot be checked; "
                    + "refuse to mint, and report the server")
        }
        guard entry.value == served else {
            throw PrivacyPassError(
                .keyNotInList,
                "the OPRF key list credential-svc served is not the one in the transparency log (version "
                    + "\(entry.version)); it may be a key made for this device alone: refuse to mint, and report it")
        }
        return try KeyList(encoded: entry.value)
    }
}
