import Age
import Foundation

/// A recovery kit that `create` or a kit replacement made and that the person has not been shown yet.
///
/// The kit is shown once and stored nowhere, but a command killed between writing the vault.json that
/// names a new kit and printing it would leave a vault whose kit nobody has. So the kit is kept on this
/// device from just before that vault.json is written until the program has printed it
/// (``VaultSession/kitShown()``): `<config>/vaults/<vault_id>.unshown-kit.age`, encrypted to this device's
/// own age identity, mode 0600, outside the vault folder (never synced). If the command stopped in
/// between, the next one says so and `sempere kit print` shows it (docs/sempere-format.md, "Crash safety").
enum UnshownKit {
    static func file(root: URL, vaultID: String) -> URL {
        DeviceState.directory(root: root).appendingPathComponent("\(vaultID).unshown-kit.age")
    }

    static func save(_ kit: RecoveryKit, root: URL, identity: any DeviceUnwrapKey) throws {
        let directory = DeviceState.directory(root: root)
        do {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw SempereError(.io, "cannot create \(directory.path): \(plainCreateFailure(at: directory, error))")
        }
        let file = try Age.encrypt(Data(kit.secretString.utf8), to: [identity.recipient])
        try AtomicWrite.write(file, to: Self.file(root: root, vaultID: kit.vaultID), mode: 0o600)
    }

    /// The kit kept for `vaultID`, or nil when there is none (or it does not open: it is then only noise).
    static func load(root: URL, vaultID: String, identity: any DeviceUnwrapKey) throws -> RecoveryKit? {
        guard let plaintext = try DeviceLocalFile.open(Self.file(root: root, vaultID: vaultID), identity: identity)
        else { return nil }
        return try? RecoveryKit(secretString: String(decoding: plaintext, as: UTF8.self), vaultID: vaultID)
    }

    static func remove(root: URL, vaultID: String) throws {
        let url = Self.file(root: root, vaultID: vaultID)
        do {
            try FileManager.default.removeItem(at: url)
        } catch CocoaError.fileNoSuchFile {
            return
        } catch {
            throw SempereError(.io, "cannot remove \(url.path): \(plainDescription(of: error))")
        }
    }
}
