import Age
import Foundation
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
            throw SempereError(.io, "cannot list \(directory.path): \(error.localizedDescription)")
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
        var missing: [String] = []
        var path = directory.standardizedFileURL.path
        var info = stat()
        while lstat(path, &info) != 0 {
            guard errno == ENOENT else {
                throw SempereError(.io, "cannot look at \(path): \(String(cString: strerror(errno)))")
            }
            missing.append(path)
            path = (path as NSString).deletingLastPathComponent
        }
        for path in missing.reversed() where mkdir(path, 0o700) != 0 && errno != EEXIST {
            throw SempereError(
                .io,
                "cannot create the key directory \(path): \(String(cString: strerror(errno))); "
                    + "check that its parent is yours and writable")
        }
    }

    /// Refuses a directory that is a symbolic link, not a directory, someone else's, or open to others.
    private func checkDirectory() throws {
        let path = directory.path
        var info = stat()
        guard lstat(path, &info) == 0 else {
            throw SempereError(.io, "cannot look at the key directory \(path): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw SempereError(
                .insecureKeyStore,
                "the key directory \(path) is not a directory (it is a symbolic link or a file): "
                    + "move it away, so that a private directory can be made there")
        }
        guard info.st_uid == geteuid() else {
            throw SempereError(
                .insecureKeyStore,
                "the key directory \(path) belongs to user id \(info.st_uid), not to you (\(geteuid())): "
                    + "use a directory of your own (set XDG_CONFIG_HOME), or have its owner give it to you")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw SempereError(
                .insecureKeyStore,
                "the key directory \(path) is open to other users (mode \(String(info.st_mode & 0o777, radix: 8))): "
                    + "run `chmod 700 \(path)`; if others could read it, treat its keys as exposed")
        }
    }

    /// The file's contents, or nil if it does not exist; refuses a file that is a link, someone else's,
    /// or readable by others.
    private func read(_ url: URL) throws -> Data? {
        let descriptor = open(url.path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { return nil }
            if errno == ELOOP {
                throw SempereError(
                    .insecureKeyStore,
                    "\(url.path) is a symbolic link: a key file must be a plain file; remove the link")
            }
            throw SempereError(.io, "cannot open \(url.path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            throw SempereError(.io, "cannot look at \(url.path): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFREG, info.st_uid == geteuid() else {
            throw SempereError(
                .insecureKeyStore,
                "\(url.path) is not a plain file of yours: a key file must be; move it away and restore the key")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw SempereError(
                .insecureKeyStore,
                "\(url.path) is open to other users (mode \(String(info.st_mode & 0o777, radix: 8))): "
                    + "run `chmod 600 \(url.path)`; if others could read it, treat the key as exposed")
        }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count == 0 { return data }
            if count < 0 {
                if errno == EINTR { continue }
                throw SempereError(.io, "cannot read \(url.path): \(String(cString: strerror(errno)))")
            }
            data.append(contentsOf: buffer[..<count])
        }
    }

    /// Writes `data` to `url` atomically, as a 0600 file.
    private func write(_ data: Data, to url: URL) throws {
        try AtomicWrite.write(data, to: url, mode: 0o600)
    }

    private func remove(_ url: URL) throws {
        guard unlink(url.path) == 0 || errno == ENOENT else {
            throw SempereError(.io, "cannot remove \(url.path): \(String(cString: strerror(errno)))")
        }
    }

    /// Makes renames and removals in the directory durable.
    private func syncDirectory() throws {
        try AtomicWrite.syncDirectory(directory)
    }
}
