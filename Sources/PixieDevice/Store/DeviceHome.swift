import Foundation
import PixieWire
import PrivateFiles
import SiblingsCrypto
import SystemCalls
import Transparency
import WebAuthn

#if canImport(Glibc)
    import Glibc
#endif

/// One device's own state in a private directory (`pixie --home DIR`): its keys, its passkey, its session, the
/// account's seeds once it has them, and the transparency checkpoint it has pinned. One file, `device.json`, mode
/// 0600, replaced atomically, in a directory of mode 0700 that must be this user's alone (``PrivateFiles``).
public struct DeviceHome: Sendable {
    public let directory: URL
    var file: URL { directory.appendingPathComponent("device.json") }

    /// Opens (creating it if needed) the home at `directory`; refuses one that is not private.
    public init(directory: URL) throws {
        self.directory = directory
        do {
            try PrivateFiles.createDirectory(directory, noun: "the device's home")
            try check()
        } catch {
            throw DeviceError.home(error.reason)
        }
    }

    private func check() throws(PrivateFilesError) {
        try PrivateFiles.checkDirectory(
            directory, noun: "the device's home", remedy: "use a directory of your own for --home")
    }

    /// The saved state, or nil for a home no device was set up in.
    public func load() throws -> DeviceState? {
        let data: Data?
        do {
            try check()
            data = try PrivateFiles.read(file, noun: "a device's state")
        } catch {
            throw DeviceError.home(error.reason)
        }
        guard let data else { return nil }
        do {
            return try JSONDecoder().decode(DeviceState.self, from: data)
        } catch {
            throw DeviceError.home(
                "\(file.path) is damaged (not the JSON this version writes); restore it from a backup, or move it away "
                    + "and set this device up again")
        }
    }

    /// The saved state; throws if no device was set up here.
    public func state() throws -> DeviceState {
        guard let state = try load() else {
            throw DeviceError.notSetUp(
                "no device is set up in \(directory.path): run `pixie init` (a new account) or `pixie signin`")
        }
        return state
    }

    public func save(_ state: DeviceState) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        do {
            try check()
            try PrivateFiles.write(try encoder.encode(state), to: file)
            try PrivateFiles.syncDirectory(directory)
        } catch let error as PrivateFilesError {
            throw DeviceError.home(error.reason)
        }
    }
}

extension DeviceHome {
    /// Removes the device's state and its store from this home.
    public func erase() throws {
        try locked {
            try StoreFile.removeAll(link: directory.appendingPathComponent(DeviceStore.fileName))
            do throws(PrivateFilesError) {
                try PrivateFiles.remove(directory.appendingPathComponent(Self.answeredSignInsFile))
                try PrivateFiles.remove(directory.appendingPathComponent(Self.serverCAFile))
                try PrivateFiles.remove(file)
                try PrivateFiles.syncDirectory(directory)
            } catch {
                throw DeviceError.home(error.reason)
            }
        }
    }

    /// Applies `change` to the state saved now, if there still is one, under a lock that other `pixie` processes
    /// on this home take too: a command that ran while another signed out must not write the keys back.
    public func update(_ change: (inout DeviceState) -> Void) throws {
        try locked {
            guard var state = try load() else { return }
            change(&state)
            try save(state)
        }
    }

    static let answeredSignInsFile = "answered-signins.json"

    /// The sign-in requests this device answered lately (``SignInRequestHandler/answeredRequests(now:)``): the
    /// SHA-256 of each request's box, with when it was acknowledged. Kept in `<home>/answered-signins.json` (mode
    /// 0600), so that a relay which replays a request after `pixie listen` restarts raises no second prompt. Empty
    /// when there is no record yet.
    public func answeredSignIns() throws -> [Data: Date] {
        let data: Data?
        do {
            try check()
            data = try PrivateFiles.read(
                directory.appendingPathComponent(Self.answeredSignInsFile), noun: "the answered sign-in requests")
        } catch {
            throw DeviceError.home(error.reason)
        }
        guard let data else { return [:] }
        guard let record = try? JSONDecoder().decode(AnsweredSignIns.self, from: data) else {
            throw DeviceError.home(
                "\(directory.appendingPathComponent(Self.answeredSignInsFile).path) is damaged (not the JSON this "
                    + "version writes); remove it, and requests answered in the last ten minutes may prompt once more")
        }
        var answered: [Data: Date] = [:]
        for entry in record.answered {
            answered[entry.digest.data] = Date(timeIntervalSince1970: TimeInterval(entry.acknowledgedAt))
        }
        return answered
    }

    /// Replaces the record of answered sign-in requests with `answered`, durably (written, synced and renamed).
    public func saveAnsweredSignIns(_ answered: [Data: Date]) throws {
        let record = AnsweredSignIns(
            answered: answered.sorted { $0.value < $1.value }.map {
                AnsweredSignIns.Entry(
                    digest: Base64URLBytes($0.key), acknowledgedAt: Int64($0.value.timeIntervalSince1970.rounded(.up)))
            })
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do {
            try check()
            try PrivateFiles.write(
                try encoder.encode(record), to: directory.appendingPathComponent(Self.answeredSignInsFile))
            try PrivateFiles.syncDirectory(directory)
        } catch let error as PrivateFilesError {
            throw DeviceError.home(error.reason)
        }
    }

    /// Runs `body` holding an exclusive `flock(2)` on `<home>/.lock`.
    func locked<T>(_ body: () throws -> T) throws -> T {
        do {
            return try PrivateFiles.locked(directory.appendingPathComponent(".lock"), body)
        } catch let error as PrivateFilesError {
            throw DeviceError.home(error.reason)
        }
    }
}

/// What a device keeps (``DeviceHome``). Secrets are base64url in JSON, in a file only its user can read.
public struct DeviceState: Codable, Sendable {
    /// The account this device is in, once it created one or was approved into one.
    public struct Membership: Codable, Sendable {
        public var accountID: String
        public var deviceID: String
        public var ktHandle: String
        public var sessionToken: String
        public var sessionExpiresAt: Int64
        /// The account signing seed: it derives the sibling channel key.
        public var accountSeed: Base64URLBytes
        /// The discovery key's X-Wing seed (and the discovery inbox's subscribe key).
        public var discoverySeed: Base64URLBytes
        /// The account's epoch these seeds belong to (the version of `account/<kt_handle>` in the log); nil for 1,
        /// the epoch of every account until a device is removed.
        public var epoch: UInt64?

        /// In the roster (by a six-digit code) with a session, but no sibling has sent the seeds yet.
        public var isEnrolledWithoutSeeds: Bool { !sessionToken.isEmpty && accountSeed.data.isEmpty }
    }

    public var server: String
    public var trustBundle: TrustBundle
    public var name: String
    /// Its family ("iPhone", "Linux"), enrolled beside the name; nil for a device set up before it had one.
    public var family: String?
    public var phoneNumber: String
    /// The latest verified PhoneOwnershipCert (24 hours).
    public var phoneCert: Base64URLBytes
    public var phoneID: Base64URLBytes
    /// The device's hybrid signing seed (its roster pubkey).
    public var identitySeed: Base64URLBytes
    /// Its X-Wing seed (the sealing key siblings seal to).
    public var sealingSeed: Base64URLBytes
    /// Its inbox's Ed25519 subscribe key.
    public var inboxKey: Base64URLBytes
    /// The software authenticator's state: this device's passkey.
    public var passkey: Base64URLBytes
    /// The transparency checkpoint this device has pinned (``TransparencyVerifier/state``).
    public var transparency: Base64URLBytes
    /// The server's clock minus this device's, in milliseconds, as last measured (``CorrectedClock``); nil until
    /// measured, for a device set up before it was kept.
    public var serverClockOffset: Int64?
    public var membership: Membership?

    public var serverURL: URL {
        get throws {
            guard let url = URL(string: server) else {
                throw DeviceError.notSetUp("the saved server \(server) is not a URL")
            }
            return url
        }
    }

    var identity: HybridSignature.PrivateKey { get throws { try .init(seedRepresentation: identitySeed.data) } }
    @_spi(Testing) public var sealing: XWing.PrivateKey {
        get throws { try .init(seedRepresentation: sealingSeed.data) }
    }
    @_spi(Testing) public var inbox: RelaySubjectKey {
        get throws { RelaySubjectKey(signingKey: try Curve25519.Signing.PrivateKey(rawRepresentation: inboxKey.data)) }
    }

    /// This device's author tag in the reconcile loop (docs/pixie-sync.md, "Versions"), from its roster pubkey.
    public var author: AuthorTag {
        get throws { AuthorTag(devicePublicKey: try identity.publicKey.rawRepresentation) }
    }

    /// What this device enrolls as.
    var deviceFields: IdentityAPI.DeviceFields {
        get throws {
            IdentityAPI.DeviceFields(
                pubkey: Base64URLBytes(try identity.publicKey.rawRepresentation), name: name,
                inbox: Base64URLBytes(try inbox.subject.rawRepresentation),
                sealingKey: Base64URLBytes(try sealing.publicKey.rawRepresentation), family: family)
        }
    }
}

/// What goes wrong with a device as a whole, with what to do.
public enum DeviceError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The home directory or its file cannot be used.
    case home(String)
    /// No device is set up here, or it is not in an account yet.
    case notSetUp(String)
    /// Already set up; say what to do instead.
    case alreadySetUp(String)
    /// The phone code could not be had.
    case phoneCode(String)
    /// Refused: this is the account's last device, and the step would lose the account.
    case lastDevice(String)

    public var description: String {
        switch self {
        case .home(let reason), .notSetUp(let reason), .alreadySetUp(let reason), .phoneCode(let reason),
            .lastDevice(let reason):
            reason
        }
    }
}

/// `<home>/answered-signins.json`: `{"answered":[{"acknowledged_at":UNIX,"digest":BASE64URL}]}`.
struct AnsweredSignIns: Codable {
    struct Entry: Codable {
        let digest: Base64URLBytes
        let acknowledgedAt: Int64

        enum CodingKeys: String, CodingKey {
            case digest
            case acknowledgedAt = "acknowledged_at"
        }
    }

    let answered: [Entry]
}

extension DeviceHome {
    static let serverCAFile = "server-ca.pem"

    /// The private CA (PEM) this device trusts for its `https://` server, kept by ``trustServerCA(from:)`` (`pixie
    /// --ca-file`); nil when it trusts the system's trust store.
    public var serverCA: URL? {
        let file = directory.appendingPathComponent(Self.serverCAFile)
        return FileManager.default.fileExists(atPath: file.path) ? file : nil
    }

    /// How this device checks its server's certificate: against its kept CA, or the system's trust store.
    public var tls: TLSConfiguration { .client(trust: serverCA.map { .caFile($0.path) } ?? .system) }

    /// Keeps the CA certificates (PEM) in `file` as the only ones this device trusts for its `https://` server
    /// (a private CA, as a test or a closed network has), checked first: OpenSSL must read them.
    public func trustServerCA(from file: String) throws {
        guard let pem = FileManager.default.contents(atPath: file) else {
            throw DeviceError.home("cannot read the CA file \(file); name a PEM file of CA certificates")
        }
        do throws(TLSError) {
            _ = try TLSContext(.client(trust: .caFile(file)))
        } catch {
            throw DeviceError.home("\(file) holds no CA certificate OpenSSL can read (PEM): \(error.message)")
        }
        do throws(PrivateFilesError) {
            try check()
            try PrivateFiles.write(pem, to: directory.appendingPathComponent(Self.serverCAFile))
            try PrivateFiles.syncDirectory(directory)
        } catch {
            throw DeviceError.home(error.reason)
        }
    }
}
