import Age
import Foundation
import PrivateFiles
import SiblingsCrypto

#if canImport(Glibc)
    import Glibc
#endif

/// A ``KeyStore`` of files in a private directory, by default `$XDG_CONFIG_HOME/sempere/keys`
/// (`~/.config/sempere/keys`).
///
/// - The directory is created with mode 0700 and checked before every use: it must be a directory
///   (not a symbolic link), owned by this user, and closed to group and others. Otherwise nothing is
///   read or written and the error says how to fix it.
/// - Each secret is one file, mode 0600, written atomically (a temporary file in the same directory,
///   fsync, rename, fsync of the directory), so a crash leaves the old secret or the new one.
/// - Without a passphrase a secret is stored as it is, in `<name>.key`. With one, it is stored in
///   `<name>.age`, an age v1 file encrypted to the passphrase (scrypt), which stock `age -d` opens.
public struct FileKeyStore: KeyStore {
    /// The directory holding the secrets.
    public let directory: URL
    private let passphrase: String?
    private let workFactor: Int

    /// Opens (creating it if needed) the key store in `directory`, or in the default
    /// ``defaultDirectory(environment:)``.
    ///
    /// - Parameters:
    ///   - passphrase: protects every secret stored from now on; needed to load protected ones.
    ///   - workFactor: scrypt's log2(N) for passphrase-protected secrets (age's default, 18, takes about a
    ///     second and 256 MiB).
    /// - Throws: ``SempereError/Code/insecureKeyStore`` when the directory is not private to this user.
    public init(
        directory: URL? = nil, passphrase: String? = nil, workFactor: Int = ScryptRecipient.defaultWorkFactor,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        self.directory = try directory ?? Self.defaultDirectory(environment: environment)
        self.passphrase = passphrase
        self.workFactor = workFactor
        if let passphrase {
            // Checks the passphrase and work factor now rather than at the first store.
            _ = try ScryptRecipient(passphrase: passphrase, workFactor: workFactor)
        }
        try Self.createDirectory(self.directory)
        try checkDirectory()
    }

    /// `$XDG_CONFIG_HOME/sempere/keys` when `XDG_CONFIG_HOME` is an absolute path (the XDG Base Directory
    /// specification ignores relative ones), else `$HOME/.config/sempere/keys`.
    public static func defaultDirectory(environment: [String: String]) throws -> URL {
        if let config = environment["XDG_CONFIG_HOME"], config.hasPrefix("/") {
            return URL(fileURLWithPath: config).appendingPathComponent("sempere/keys")
        }
        if let home = environment["HOME"], home.hasPrefix("/") {
            return URL(fileURLWithPath: home).appendingPathComponent(".config/sempere/keys")
        }
        throw SempereError(
            .io, "cannot find the configuration directory: set HOME (or XDG_CONFIG_HOME) to an absolute path")
    }

    // MARK: KeyStore

    public func store(_ secret: Data, as name: String) throws {
        try KeyStoreName.validate(name)
        try checkDirectory()
        if let passphrase {
            let recipient = try ScryptRecipient(passphrase: passphrase, workFactor: workFactor)
            try write(try Age.encrypt(secret, to: [recipient]), to: url(name, protected: true))
            try remove(url(name, protected: false))
        } else {
            try write(secret, to: url(name, protected: false))
            try remove(url(name, protected: true))
        }
        try syncDirectory()
    }

    public func load(_ name: String) throws -> Data? {
        try KeyStoreName.validate(name)
        try checkDirectory()
        if let file = try read(url(name, protected: true)) {
            guard let passphrase else {
                throw SempereError(
                    .passphraseRequired,
                    "the secret \"\(name)\" is protected by a passphrase: open the key store with its passphrase")
            }
            do {
                return try Age.decrypt(
                    file, identities: [ScryptIdentity(passphrase: passphrase, maxWorkFactor: max(22, workFactor))])
            } catch let error as AgeError where error.code == .noMatchingIdentity {
                throw SempereError(
                    .wrongPassphrase,
                    "the passphrase does not open the secret \"\(name)\": check the passphrase and try again")
            } catch let error as AgeError {
                throw SempereError(
                    .invalidSecret,
                    "the secret \"\(name)\" in \(url(name, protected: true).path) is damaged (\(error.reason)); "
                        + "restore it from a backup, or remove it and set this device up again")
            }
        }
        return try read(url(name, protected: false))
    }

    public func delete(_ name: String) throws {
        try KeyStoreName.validate(name)
        try checkDirectory()
        try remove(url(name, protected: true))
        try remove(url(name, protected: false))
        try syncDirectory()
    }

    public func list() throws -> [String] {
        try checkDirectory()
        let entries: [String]
        do {
            entries = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw SempereError(.io, "cannot list \(directory.path): \(plainDescription(of: error))")
        }
        let names = entries.compactMap { entry -> String? in
            for suffix in [".key", ".age"] where entry.hasSuffix(suffix) {
                let name = String(entry.dropLast(suffix.count))
                return KeyStoreName.isValid(name) ? name : nil
            }
            return nil
        }
        return Set(names).sorted()
    }

    // MARK: Files

    private func url(_ name: String, protected: Bool) -> URL {
        directory.appendingPathComponent(name + (protected ? ".age" : ".key"))
    }

    /// Creates `directory` and any missing parents with mode 0700; existing ones are left as they are.
    static func createDirectory(_ directory: URL) throws {
        do {
            try PrivateFiles.createDirectory(directory, noun: "the key directory")
        } catch {
            throw SempereError(error)
        }
    }

    /// Refuses a directory that is a symbolic link, not a directory, someone else's, or open to others.
    private func checkDirectory() throws {
        do {
            try PrivateFiles.checkDirectory(
                directory, noun: "the key directory",
                remedy: "use a directory of your own (set XDG_CONFIG_HOME), or have its owner give it to you")
        } catch {
            throw SempereError(error)
        }
    }

    /// The file's contents, or nil if it does not exist; refuses a file that is a link, someone else's,
    /// or readable by others.
    private func read(_ url: URL) throws -> Data? {
        do {
            return try PrivateFiles.read(url, noun: "a key file")
        } catch {
            throw SempereError(error)
        }
    }

    /// Writes `data` to `url` atomically, as a 0600 file.
    private func write(_ data: Data, to url: URL) throws {
        try AtomicWrite.write(data, to: url, mode: 0o600)
    }

    private func remove(_ url: URL) throws {
        do {
            try PrivateFiles.remove(url)
        } catch {
            throw SempereError(error)
        }
    }

    /// Makes renames and removals in the directory durable.
    private func syncDirectory() throws {
        try AtomicWrite.syncDirectory(directory)
    }
}
