import Foundation
import PixieWire
import PrivacyPass
import SiblingsCrypto
import Transparency

/// Everything a device takes from a server only once the key-transparency log proves it
/// (000_e422bd9a7c930342.txt: "What comes back is an unproven database read, so it is checked against the
/// transparency log ... before anything is sealed to it"): the account's discovery inbox and key, its signing key,
/// its roster, and the OPRF key list the token mint uses (the verifier SignInApprovalRequester's mint takes, since a
/// per-user key would tag a new device "from birth").
///
/// Each check asks identity-svc for a label's lookup proof (`POST /v1/kt/lookup`), verifies it with the device's
/// ``TransparencyVerifier`` (the pinned checkpoint, a consistency proof from it, the label's latest value) and
/// compares the logged value with what the server served. Every check fails closed: no proof, a proof that fails,
/// a label never logged, or a value that differs, all throw, and the caller does not proceed. The pinned checkpoint
/// only moves forward through a proven consistency; keep ``state`` across launches.
public actor LoggedBindings: KeyListVerifier {
    /// Fetches identity-svc's answer for `label`, with a consistency proof from the checkpoint of size `since` when
    /// the device has one pinned; nil when the server gave no answer.
    public typealias Lookup = @Sendable (_ label: Label, _ since: UInt64?) async throws -> LookupAnswer?

    private var verifier: TransparencyVerifier
    private let lookup: Lookup

    /// `verifier` carries the device's pinned checkpoint: from the trust bundle on a new device
    /// (``TransparencyVerifier/init(trustBundle:)``), from ``state`` afterwards.
    public init(verifier: TransparencyVerifier, lookup: @escaping Lookup) {
        self.verifier = verifier
        self.lookup = lookup
    }

    /// Lookups through `client`.
    public init(verifier: TransparencyVerifier, client: PixieClient) {
        self.init(verifier: verifier) { label, since in
            try LookupAnswer(try await client.lookup(label: label.description, since: since))
        }
    }

    /// The pinned checkpoint, for the device to keep (``TransparencyVerifier/init(logKey:state:)``).
    public var state: Data { verifier.state }

    /// `label`'s latest logged value, proven; nil when the log proves the label was never written.
    public func loggedValue(_ label: String) async throws -> Data? {
        try await loggedEntry(label)?.value
    }

    /// `label`'s latest logged entry (its value and version), proven; nil when the log proves it was never written.
    public func loggedEntry(_ label: String) async throws -> Entry? {
        let label = try Label(label)
        // A check that ran while this one waited for the network may have moved the pin; the consistency proof
        // asked for is then from the wrong size, so ask again from the new one.
        for _ in 0..<3 {
            let since = verifier.pinned?.size
            let answer = try await lookup(label, since)
            guard verifier.pinned?.size == since else { continue }
            return try verifier.verify(label: label, answer: answer)
        }
        throw TransparencyError(
            .missingProof, "the proof for \(label) kept arriving for an older checkpoint; try again")
    }

    /// The discovery binding of a number, as the log holds it.
    public struct VerifiedDiscovery: Sendable, Equatable {
        public let inbox: RelaySubject
        public let key: XWing.PublicKey
        /// The account's label in the log: which account this number's approvals must be for.
        public let ktHandle: String
    }

    /// Checks identity-svc's discovery answer for the number `phoneID` against `discovery/<phone_id>`, and
    /// returns the discovery key to seal to, with the account the log binds the number to.
    public func verifiedDiscovery(
        _ answer: IdentityAPI.DiscoveryResponse, phoneID: Data
    ) async throws
        -> VerifiedDiscovery
    {
        guard let logged = try await loggedValue(KeyTransparencyLabel.discovery(phoneID: phoneID)) else {
            throw LoggedBindingsError.notLogged("this number's discovery inbox")
        }
        guard let binding = KeyTransparencyCommitment.DiscoveryBinding(logged: logged),
            safeCompare(binding.inbox.rawRepresentation, answer.discoveryInbox.data),
            safeCompare(binding.discoveryKey, answer.discoveryXWingPubkey.data)
        else { throw LoggedBindingsError.differs("the discovery inbox and key") }
        return VerifiedDiscovery(
            inbox: binding.inbox, key: try XWing.PublicKey(rawRepresentation: binding.discoveryKey),
            ktHandle: binding.ktHandle)
    }

    /// The account signing public key logged under `account/<kt_handle>`.
    public func accountSigningKey(ktHandle: String) async throws -> HybridSignature.PublicKey {
        guard let logged = try await loggedValue(KeyTransparencyLabel.account(ktHandle: ktHandle)) else {
            throw LoggedBindingsError.notLogged("the account signing key of \(ktHandle)")
        }
        return try HybridSignature.PublicKey(rawRepresentation: logged)
    }

    /// The account signing key of `ktHandle` as someone who knew `known` takes it (a contact, docs/pixie-protocol.md,
    /// "Revoking a device"): `known` while the log still holds it; after a rotation, the logged key only with the
    /// logged statement that moves the account from `known` to it, signed by both. A new key without such a
    /// statement is refused (``RotationError/logDisagrees(_:)``), so a server cannot swap an account's key for one of
    /// its own by logging it. The log keeps the latest statement: a contact that missed more than one rotation
    /// finds one that does not start from the key it knew, and is refused the same way.
    public func followedAccountKey(
        ktHandle: String, known: HybridSignature.PublicKey
    ) async throws -> HybridSignature.PublicKey {
        let logged = try await accountSigningKey(ktHandle: ktHandle)
        if logged == known { return known }
        guard
            let value = try await loggedValue(KeyTransparencyLabel.accountRotation(ktHandle: ktHandle)),
            let statement = try? AccountRotation(decoding: value)
        else {
            throw RotationError.logDisagrees(
                "the log holds a new account key for \(ktHandle) with no rotation statement; the key is refused")
        }
        do {
            try statement.verify(previousKey: known)
        } catch {
            throw RotationError.logDisagrees(
                "the account's rotation statement does not move it from the key known here (\(error.reason)); the new "
                    + "key is refused")
        }
        guard statement.newKey == logged, statement.ktHandle == ktHandle else {
            throw RotationError.logDisagrees(
                "the log's account key is not the one its rotation statement signs for; the key is refused")
        }
        return logged
    }

    /// The roster `siblings` lists, once it is the one `devices/<kt_handle>` commits to.
    public func verifiedRoster(
        _ siblings: IdentityAPI.SiblingsResponse, ktHandle: String
    ) async throws
        -> [RosterDevice]
    {
        let roster = try siblings.roster()
        guard let logged = try await loggedValue(KeyTransparencyLabel.devices(ktHandle: ktHandle)) else {
            throw LoggedBindingsError.notLogged("the account's roster")
        }
        guard safeCompare(logged, KeyTransparencyCommitment.roster(roster)) else {
            throw LoggedBindingsError.differs("the list of the account's devices")
        }
        return roster
    }

    public func loggedKeyList(matching served: Data) async throws -> KeyList {
        try await loggedKeyList(matching: served, label: KeyList.logLabel)
    }

    /// The same for the key list of another token class, logged under `label` (`oprf-keys/upload`).
    public func loggedKeyList(matching served: Data, label: String) async throws -> KeyList {
        guard let logged = try await loggedValue(label) else {
            throw PrivacyPassError(
                .keyNotInList,
                "the transparency log proves it holds no OPRF key list, so the served one cannot be checked; "
                    + "refuse to mint, and report the server")
        }
        guard logged == served else {
            throw PrivacyPassError(
                .keyNotInList,
                "the OPRF key list credential-svc served is not the one in the transparency log; it may be a key "
                    + "made for this device alone: refuse to mint, and report it")
        }
        return try KeyList(encoded: logged)
    }
}

/// A binding the server served that the log does not back.
public enum LoggedBindingsError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The log proves it never held the binding.
    case notLogged(String)
    /// The log holds another value than the server served.
    case differs(String)

    public var description: String {
        switch self {
        case .notLogged(let what):
            "the transparency log proves it holds no record of \(what), so the server's answer cannot be trusted; "
                + "nothing was sealed or sent"
        case .differs(let what):
            "the server served \(what) differently from what the transparency log holds: it may be substituting "
                + "keys, so nothing was sealed or sent; report the server"
        }
    }
}

/// Checks a served key list of the upload class against its own log label (`oprf-keys/upload`).
public struct UploadKeyListVerifier: KeyListVerifier {
    public let bindings: LoggedBindings

    public init(bindings: LoggedBindings) { self.bindings = bindings }

    public func loggedKeyList(matching served: Data) async throws -> KeyList {
        try await bindings.loggedKeyList(matching: served, label: KeyList.uploadLogLabel)
    }
}
