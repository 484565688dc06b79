import Foundation
import Synchronization

/// Where a device keeps its secrets: named byte strings that never leave it.
///
/// Each device makes its own keys when it creates or joins a vault and keeps them here
/// (``DeviceKeys``). ``FileKeyStore`` keeps them in files under the XDG config directory;
/// ``InMemoryKeyStore`` is for tests. Names are 1–64 characters of `a-z 0-9 . _ -`, starting with a
/// letter or digit.
public protocol KeyStore: Sendable {
    /// Stores `secret` under `name`, replacing any secret of that name.
    func store(_ secret: Data, as name: String) throws
    /// The secret stored under `name`, or nil if there is none.
    func load(_ name: String) throws -> Data?
    /// Deletes the secret stored under `name`; deleting a name with no secret does nothing.
    func delete(_ name: String) throws
    /// The names of the stored secrets, sorted.
    func list() throws -> [String]
}

/// The rule for secret names, shared by every ``KeyStore``.
public enum KeyStoreName {
    /// The longest name accepted.
    public static let maximumLength = 64

    /// Whether `name` is a valid secret name.
    public static func isValid(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...maximumLength).contains(bytes.count), let first = bytes.first, isLetterOrDigit(first) else {
            return false
        }
        return bytes.allSatisfy {
            isLetterOrDigit($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-")
        }
    }

    /// Throws ``SempereError/Code/invalidName`` unless `name` is valid.
    public static func validate(_ name: String) throws {
        guard isValid(name) else {
            throw SempereError(
                .invalidName,
                "\"\(name.prefix(80))\" is not a valid secret name: use 1 to \(maximumLength) characters of "
                    + "a-z, 0-9, '.', '_' and '-', starting with a letter or digit")
        }
    }

    private static func isLetterOrDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }
}

/// A ``KeyStore`` in memory, for tests: secrets vanish with it.
public final class InMemoryKeyStore: KeyStore {
    private let secrets = Mutex<[String: Data]>([:])

    public init() {}

    public func store(_ secret: Data, as name: String) throws {
        try KeyStoreName.validate(name)
        secrets.withLock { $0[name] = secret }
    }

    public func load(_ name: String) throws -> Data? {
        try KeyStoreName.validate(name)
        return secrets.withLock { $0[name] }
    }

    public func delete(_ name: String) throws {
        try KeyStoreName.validate(name)
        _ = secrets.withLock { $0.removeValue(forKey: name) }
    }

    public func list() throws -> [String] {
        secrets.withLock { $0.keys.sorted() }
    }
}
