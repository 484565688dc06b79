import Age
import Foundation
import SiblingsCrypto

/// An unwrap key held by an age plugin (docs/sempere-format.md, "An unwrap key in hardware"): chosen when the
/// device makes its keys, at `create` or `join`, and used through ``PluginUnwrapKey`` from then on.
extension VaultSession {
    /// Sets how an age plugin that holds a device's unwrap key reaches the person: its messages ("touch your
    /// YubiKey") and its requests (a PIN). Without this, messages are not shown and requests fail.
    ///
    /// A command unwraps a few files with the device's key (the vault key's wrap, this device's own index), and the
    /// plugin runs once for each. What the person answers to a secret request is kept in this process's memory, for
    /// the same request, once a run of the plugin that used it has worked: a PIN is asked once per process (one
    /// command), as the passphrase of the device's keys is, and a wrong one is never sent again (a YubiKey blocks
    /// its PIN after three). It is never written anywhere.
    public static func askForPluginRequests(_ ui: AgePluginUI) {
        var remembering = ui
        remembering.requestSecret = { message in
            if let known = KeyUnlocking.shared.state.withLock({ $0.pluginAnswers[message] }) { return known }
            let answer = ui.requestSecret(message)
            if let answer { KeyUnlocking.shared.state.withLock { $0.pendingPluginAnswers[message] = answer } }
            return answer
        }
        KeyUnlocking.shared.state.withLock { $0.pluginUI = remembering }
    }

    /// Keeps the unwrap key of the keys this process makes from now on in an age plugin, given the identity file the
    /// plugin wrote (``PluginUnwrapKey/init(identityFile:ui:searchPath:)``). The plugin is tried first, a wrap and an
    /// unwrap, so a key that cannot be used is refused here, before anything is written.
    ///
    /// A post-quantum vault refuses such keys: no plugin says its key is post-quantum.
    @discardableResult
    public static func keepNewUnwrapKey(inPlugin identityFile: String) throws -> PluginUnwrapKey {
        let ui = KeyUnlocking.shared.state.withLock { $0.pluginUI }
        let key = try PluginUnwrapKey(identityFile: identityFile, ui: ui)
        try key.check()
        KeyUnlocking.shared.state.withLock { $0.newUnwrapKey = key }
        return key
    }

    /// New keys for this device: its unwrap key the plugin one ``keepNewUnwrapKey(inPlugin:)`` set, or made in
    /// software.
    static func newKeys(postQuantum: Bool) throws -> DeviceKeys {
        guard let plugin = KeyUnlocking.shared.state.withLock({ $0.newUnwrapKey }) else {
            return DeviceKeys.generate(postQuantum: postQuantum)
        }
        guard !postQuantum else {
            throw SempereError(
                .keyUnavailable,
                "this vault is post-quantum, and a key held by age-plugin-\(plugin.plugin.name) is classical (no "
                    + "plugin says it is post-quantum), so it cannot be this device's unwrap key: join without "
                    + "--unwrap-key-plugin; nothing was written")
        }
        return DeviceKeys(signingKey: HybridSignature.PrivateKey(), identity: plugin)
    }

    /// Refuses to go on when a plugin key was asked for but the device already has keys of its own: a device makes
    /// its keys once, and its unwrap key is in the vault's list.
    static func checkNoPluginAskedFor(existing keys: DeviceKeys) throws {
        guard let plugin = KeyUnlocking.shared.state.withLock({ $0.newUnwrapKey }),
            keys.identity.recipientString != plugin.recipientString
        else { return }
        throw SempereError(
            .alreadyExists,
            "this device already has keys, so --unwrap-key-plugin cannot choose its unwrap key now: a device makes its "
                + "keys once. Use a new --config for a device whose key the plugin holds")
    }
}
