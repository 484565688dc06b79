import Age
import Foundation
import Sempere
import SiblingsCrypto
import SiblingsTestSupport
import Testing

@Suite struct KeyStoreTests {
    /// A fresh FileKeyStore in a temporary directory (its keys directory created by the store).
    static func withFileStore<R>(
        passphrase: String? = nil, _ body: (FileKeyStore, URL) throws -> R
    ) throws -> R {
        let root = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let store = try FileKeyStore(
            directory: root.appendingPathComponent("config/sempere/keys"), passphrase: passphrase, workFactor: 10)
        return try body(store, root)
    }

    static func mode(_ path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return try #require(attributes[.posixPermissions] as? Int)
    }

    /// The behaviour every KeyStore shares.
    static func exercise(_ store: some KeyStore) throws {
        #expect(try store.list() == [])
        #expect(try store.load("device-signing-key") == nil)
        let first = SecureRandom.bytes(count: 32)
        try store.store(first, as: "b-key")
        try store.store(Data(), as: "a.key_2")
        #expect(try store.load("b-key") == first)
        #expect(try store.load("a.key_2") == Data())
        #expect(try store.list() == ["a.key_2", "b-key"])
        let second = SecureRandom.bytes(count: 100)
        try store.store(second, as: "b-key")
        #expect(try store.load("b-key") == second)
        try store.delete("b-key")
        try store.delete("b-key")
        try store.delete("never-stored")
        #expect(try store.load("b-key") == nil)
        #expect(try store.list() == ["a.key_2"])
        for bad in [
            "", "../escape", "Upper", ".hidden", "-dash", "a/b", "a b", String(repeating: "a", count: 65), "ünï",
        ] {
            expectSempereError(.invalidName) { try store.store(first, as: bad) }
            expectSempereError(.invalidName) { try store.load(bad) }
            expectSempereError(.invalidName) { try store.delete(bad) }
        }
        #expect(KeyStoreName.isValid(String(repeating: "a", count: 64)))
    }

    @Test func inMemory() throws {
        try Self.exercise(InMemoryKeyStore())
    }

    @Test func file() throws {
        try Self.withFileStore { store, root in
            try Self.exercise(store)
            #expect(try Self.mode(store.directory.path) == 0o700)
            #expect(try Self.mode(root.appendingPathComponent("config/sempere").path) == 0o700)
            #expect(try Self.mode(store.directory.appendingPathComponent("a.key_2.key").path) == 0o600)
            // Only the secrets: no temporary files left behind.
            #expect(try FileManager.default.contentsOfDirectory(atPath: store.directory.path) == ["a.key_2.key"])
            // The files hold the secret as it is, and a second store on the directory reads them.
            try store.store(Data("secret".utf8), as: "plain")
            #expect(try Data(contentsOf: store.directory.appendingPathComponent("plain.key")) == Data("secret".utf8))
            #expect(try FileKeyStore(directory: store.directory).load("plain") == Data("secret".utf8))
        }
    }

    @Test func defaultDirectory() throws {
        #expect(
            try FileKeyStore.defaultDirectory(environment: ["XDG_CONFIG_HOME": "/x/config", "HOME": "/home/u"]).path
                == "/x/config/sempere/keys")
        #expect(
            try FileKeyStore.defaultDirectory(environment: ["XDG_CONFIG_HOME": "relative", "HOME": "/home/u"]).path
                == "/home/u/.config/sempere/keys")
        #expect(
            try FileKeyStore.defaultDirectory(environment: ["HOME": "/home/u"]).path == "/home/u/.config/sempere/keys")
        expectSempereError(.io) { try FileKeyStore.defaultDirectory(environment: [:]) }
        // The default is used when no directory is given.
        let root = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let store = try FileKeyStore(environment: ["XDG_CONFIG_HOME": root.path])
        #expect(store.directory.path == root.appendingPathComponent("sempere/keys").path)
        #expect(try Self.mode(store.directory.path) == 0o700)
    }

    @Test func refusesADirectoryOpenToOthers() throws {
        try Self.withFileStore { store, _ in
            try store.store(Data("x".utf8), as: "k")
            for mode in [0o750, 0o705, 0o777, 0o710] {
                #expect(chmod(store.directory.path, mode_t(mode)) == 0)
                let error = expectSempereError(.insecureKeyStore) { try store.load("k") }
                #expect(error?.reason.contains("chmod 700 \(store.directory.path)") == true)
                expectSempereError(.insecureKeyStore) { try store.store(Data(), as: "k") }
                expectSempereError(.insecureKeyStore) { try store.list() }
                expectSempereError(.insecureKeyStore) { try FileKeyStore(directory: store.directory) }
            }
            #expect(chmod(store.directory.path, 0o700) == 0)
            #expect(try store.load("k") == Data("x".utf8))
        }
    }

    @Test func refusesADirectoryOfSomeoneElse() throws {
        if geteuid() == 0 {
            try Self.withFileStore { store, _ in
                #expect(chown(store.directory.path, 65534, 65534) == 0)
                let error = expectSempereError(.insecureKeyStore) { try store.list() }
                #expect(error?.reason.contains("belongs to user id 65534") == true)
            }
        } else {
            // /tmp exists and belongs to root.
            expectSempereError(.insecureKeyStore) { try FileKeyStore(directory: URL(fileURLWithPath: "/tmp")) }
        }
    }

    @Test func refusesLinksAndOpenFiles() throws {
        try Self.withFileStore { store, root in
            try store.store(Data("x".utf8), as: "k")
            let file = store.directory.appendingPathComponent("k.key")
            #expect(chmod(file.path, 0o644) == 0)
            let error = expectSempereError(.insecureKeyStore) { try store.load("k") }
            #expect(error?.reason.contains("chmod 600") == true)
            #expect(chmod(file.path, 0o600) == 0)
            // A secret replaced by a link to a file elsewhere is not followed.
            let elsewhere = root.appendingPathComponent("elsewhere")
            try Data("y".utf8).write(to: elsewhere)
            #expect(chmod(elsewhere.path, 0o600) == 0)
            try FileManager.default.removeItem(at: file)
            try FileManager.default.createSymbolicLink(at: file, withDestinationURL: elsewhere)
            expectSempereError(.insecureKeyStore) { try store.load("k") }
            // The directory itself as a link.
            let link = root.appendingPathComponent("linked-keys")
            try FileManager.default.createSymbolicLink(at: link, withDestinationURL: store.directory)
            expectSempereError(.insecureKeyStore) { try FileKeyStore(directory: link) }
        }
    }

    @Test func passphraseProtection() throws {
        let passphrase = "correct horse battery staple"
        try Self.withFileStore(passphrase: passphrase) { store, _ in
            try Self.exercise(store)
            let secret = SecureRandom.bytes(count: 32)
            try store.store(secret, as: "device-signing-key")
            let file = store.directory.appendingPathComponent("device-signing-key.age")
            #expect(try Self.mode(file.path) == 0o600)
            #expect(
                !FileManager.default.fileExists(
                    atPath: store.directory.appendingPathComponent("device-signing-key.key").path))
            #expect(try store.load("device-signing-key") == secret)
            let encrypted = try Data(contentsOf: file)
            #expect(encrypted.starts(with: Data("age-encryption.org/v1\n-> scrypt ".utf8)))

            let wrong = try FileKeyStore(directory: store.directory, passphrase: "wrong", workFactor: 10)
            let error = expectSempereError(.wrongPassphrase) { try wrong.load("device-signing-key") }
            #expect(error?.reason.contains("check the passphrase") == true)
            expectSempereError(.passphraseRequired) {
                try FileKeyStore(directory: store.directory).load("device-signing-key")
            }
            #expect(try FileKeyStore(directory: store.directory).list() == ["a.key_2", "device-signing-key"])

            // Stock age opens it with the passphrase (Debian's age 1.1.1, through the oracle's terminal).
            let oracle = try ReferenceOracle()
            #expect(
                try oracle.bytes("age_decrypt_passphrase", ["file": encrypted, "passphrase": passphrase]) == secret)

            // A damaged file is reported as such, not as a wrong passphrase.
            var damaged = encrypted
            damaged[damaged.count - 1] ^= 1
            try damaged.write(to: file)
            #expect(chmod(file.path, 0o600) == 0)
            expectSempereError(.invalidSecret) { try store.load("device-signing-key") }

            // Storing without a passphrase replaces the protected file.
            let plain = try FileKeyStore(directory: store.directory)
            try plain.store(secret, as: "device-signing-key")
            #expect(!FileManager.default.fileExists(atPath: file.path))
            #expect(try plain.load("device-signing-key") == secret)
        }
    }

    @Test func storedByOneThreadReadByAnother() async throws {
        let store = InMemoryKeyStore()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<16 {
                group.addTask { try store.store(Data([UInt8(index)]), as: "key-\(index)") }
            }
            try await group.waitForAll()
        }
        #expect(try store.list().count == 16)
        #expect(try store.load("key-7") == Data([7]))
    }
}
