import Foundation
import Sempere
import Testing

/// A device's local state: where each vault is and its pin, one file per vault, nothing secret.
@Suite("Sempere device state")
struct DeviceStateTests {
    @Test("saved per vault, found by folder or as the only one, never holding a key")
    func roundTrip() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("sempere-state-\(UUID())")
        defer { try? FileManager.default.removeItem(at: root) }
        #expect(throws: SempereError.self) { try DeviceState.find(root: root, folder: nil) }
        let keys = DeviceKeys.generate(postQuantum: false)
        let created = try VaultHome.createVault(homeName: "Laptop", credentials: keys, postQuantum: false)
        let state = DeviceState(folder: "/tmp/vault-a", pin: created.pin)
        try state.save(root: root)
        #expect(try DeviceState.find(root: root, folder: nil) == state)
        #expect(try DeviceState.find(root: root, folder: "/tmp/vault-a/") == state)
        #expect(throws: SempereError.self) { try DeviceState.find(root: root, folder: "/tmp/elsewhere") }

        let file = root.appendingPathComponent("vaults/\(created.pin.vaultID).json")
        let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        let text = try String(contentsOf: file, encoding: .utf8)
        #expect(!text.contains("AGE-SECRET-KEY") && text.contains(created.pin.vaultID))

        let other = try VaultHome.createVault(homeName: "Laptop", credentials: keys, postQuantum: false)
        try DeviceState(folder: "/tmp/vault-b", pin: other.pin).save(root: root)
        #expect(throws: SempereError.self) { try DeviceState.find(root: root, folder: nil) }
        #expect(try DeviceState.find(root: root, folder: "/tmp/vault-b").vaultID == other.pin.vaultID)
    }

    @Test("the configuration root: --config, then SEMPERE_CONFIG, then XDG_CONFIG_HOME, then HOME")
    func configRoot() throws {
        let env = ["SEMPERE_CONFIG": "/s", "XDG_CONFIG_HOME": "/x", "HOME": "/h"]
        #expect(try DeviceState.configRoot(override: "/c", environment: env).path == "/c")
        #expect(try DeviceState.configRoot(override: nil, environment: env).path == "/s")
        #expect(try DeviceState.configRoot(override: nil, environment: ["XDG_CONFIG_HOME": "/x"]).path == "/x/sempere")
        #expect(try DeviceState.configRoot(override: nil, environment: ["HOME": "/h"]).path == "/h/.config/sempere")
    }
}
