import Foundation
import PixieWire
import SiblingsCrypto
import WebAuthn

/// What ``DeviceContext/followRotations()`` found.
public enum RotationFollowing: Sendable, Equatable {
    /// This device holds the account's current keys (epoch as the log has it).
    case current(epoch: UInt64)
    /// It took the rotations up to `epoch`: its seeds, and its BackupKey for new archives, are the new ones.
    case adopted(epoch: UInt64, steps: Int)
}

/// What ``DeviceContext/removeDevice(named:)`` did.
public struct DeviceRemoval: Sendable, Equatable {
    public let removedDeviceID: String
    public let removedName: String
    /// The account's epoch now.
    public let epoch: UInt64
    /// How many devices a bundle was sealed to (those that stay, this one included).
    public let bundles: Int
}

extension DeviceContext {
    /// The context of the device set up in `home`, with the account's current keys: it follows any rotation the log
    /// shows first (``followRotations()``), so that what runs on it seals, checks and listens under the new keys.
    public static func current(home: DeviceHome, environment: DeviceEnvironment) async throws -> DeviceContext {
        let context = try DeviceContext(home: home, environment: environment)
        guard case .adopted = try await context.followRotations() else { return context }
        return try DeviceContext(home: home, environment: environment)
    }

    /// The same device's context made again from its home (after its keys changed), on the same environment and
    /// the same clock correction.
    public func reloaded() throws -> DeviceContext {
        var base = environment
        base.clock = correctedClock.base
        return try DeviceContext(home: home, environment: base)
    }

    /// What a running component learns from ``checkRotation()``.
    enum RotationCheck {
        case unchanged
        /// The home holds other keys than this context: make a new context (``reloaded()``).
        case rotated
        /// The rotation could not be taken; the reason says why.
        case refused(String)
        /// This device was removed from the account: the server's refusal, to end with.
        case removed(any Error)
    }

    /// Follows any rotation the log shows, and says whether this context's keys are still the account's. For a
    /// component that runs on this context (``InboxListener``): it makes a new one when they are not.
    func checkRotation() async -> RotationCheck {
        do {
            try await followRotations()
            let saved = try home.state().membership
            return saved?.accountSeed != membership.accountSeed || saved?.discoverySeed != membership.discoverySeed
                ? .rotated : .unchanged
        } catch PixieClientError.refused(let status, let error) where status == 401 && error.error == "device_removed" {
            return .removed(PixieClientError.refused(status: status, error: error))
        } catch let error as RotationError {
            return .refused("\(error)")
        } catch let error as LoggedBindingsError {
            return .refused("\(error)")
        } catch let error as DeviceError {
            // No session can be had any more (its renewal was refused): nothing this device can do from here.
            return .removed(error)
        } catch is PixieClientError {
            // The server is away: asked again at the next check.
            return .unchanged
        } catch {
            // A proof that does not verify (a log that shows this device another history) is said, not skipped.
            return .refused("the transparency log's answer could not be checked: \(error)")
        }
    }

    /// Brings this device to the account's current keys (docs/pixie-protocol.md, "How the devices learn it"): when
    /// the log's account key is not the one its seed makes, it fetches the rotations past its epoch, checks each
    /// from the key it held (both signatures, its bundle, the bundle's seeds against the statement) and the last
    /// against the log, then keeps the new seeds. A rotation the log shows and the server has no bundle for is
    /// reported as withheld (``RotationError/withheld(_:)``), never waited on silently.
    @discardableResult
    public func followRotations() async throws -> RotationFollowing {
        let state = try home.state()
        let membership = try flow.member(state)
        guard !membership.isEnrolledWithoutSeeds else {
            throw DeviceError.notSetUp(
                "this device was enrolled by a code but holds no account seed yet, so it has no keys to bring up to "
                    + "date: run `pixie signin --grant-code` on it again while the device that showed the code listens")
        }
        let ktHandle = membership.ktHandle
        guard
            let logged = try await bindings.loggedEntry(KeyTransparencyLabel.account(ktHandle: ktHandle))
        else { throw LoggedBindingsError.notLogged("the account signing key of \(ktHandle)") }
        var key = try HybridSignature.PrivateKey(seedRepresentation: membership.accountSeed.data).publicKey
        if key.rawRepresentation == logged.value {
            if membership.epoch ?? 1 != logged.version {
                try home.update { $0.membership?.epoch = logged.version }
            }
            try await keepPin()
            return .current(epoch: logged.version)
        }
        let session = try await credentials.session()
        let answer = try await client.rotations(after: 0, session: session)
        // The steps start at the rotation from the key this device holds (one made before it joined has no
        // bundle for it, and does not start from its key).
        let steps = answer.rotations.drop {
            (try? AccountRotation(decoding: $0.statement.data))?.oldKey != key
        }
        guard !steps.isEmpty else {
            guard let newest = answer.rotations.last else {
                throw RotationError.logDisagrees(
                    "the log holds another account key than this device's, and the server lists no rotation")
            }
            throw RotationError.withheld(newest.epoch)
        }
        let sealing = try state.sealing
        let device = try state.identity.publicKey.rawRepresentation
        var secrets: AccountRotator.Secrets?
        var statements: [AccountRotation] = []
        for rotation in steps {
            let (statement, opened) = try AccountRotator.adopt(
                rotation, ktHandle: ktHandle, previousKey: key, sealing: sealing, device: device)
            key = statement.newKey
            secrets = opened
            statements.append(statement)
        }
        let last = statements.last
        guard let secrets, let last else { throw RotationError.logDisagrees("no rotation could be taken") }
        guard last.epoch == logged.version else {
            // The log went further than the rotations the server gave this device.
            throw RotationError.withheld(last.epoch + 1)
        }
        guard key.rawRepresentation == logged.value else {
            throw RotationError.logDisagrees("the last rotation's key is not the one the log holds")
        }
        guard
            let statement = try await bindings.loggedValue(KeyTransparencyLabel.accountRotation(ktHandle: ktHandle)),
            statement == last.encoded
        else { throw RotationError.logDisagrees("the log holds another rotation statement") }
        // Who made each step: a device on the logged roster, or one a later step removed (never a removed one).
        let listed = try await bindings.verifiedRoster(
            try await client.siblings(session: session), ktHandle: ktHandle)
        try AccountRotator.checkRemovers(
            statements, listed: Set(listed.map { Data(SHA256.hash(data: $0.pubkey)) }))
        try BackupKeyring(home: home).adoptOwnKey(secrets.backupKey)
        try home.update { state in
            state.membership?.accountSeed = Base64URLBytes(secrets.accountSeed)
            state.membership?.discoverySeed = Base64URLBytes(secrets.discoverySeed)
            state.membership?.epoch = last.epoch
        }
        try await keepPin()
        environment.log("took the account's new keys (epoch \(last.epoch))")
        return .adopted(epoch: last.epoch, steps: steps.count)
    }

    /// Removes the device named `name` from the account and rotates every key it held (`pixie devices remove`):
    /// this device makes the new seeds, signs the statement with the old account key and the new, seals a bundle
    /// to each device that stays, and asserts its own passkey with user verification over a challenge naming the
    /// device. It keeps the new seeds once the server has logged them.
    public func removeDevice(named name: String) async throws -> DeviceRemoval {
        // A rotation is made from the account's current keys only.
        let epoch: UInt64
        switch try await followRotations() {
        case .current(let current), .adopted(let current, _): epoch = current
        }
        let state = try home.state()
        let membership = try flow.member(state)
        let session = try await credentials.session()
        let listed = try await client.siblings(session: session)
        let roster = try await bindings.verifiedRoster(listed, ktHandle: membership.ktHandle)
        let own = try state.identity.publicKey.rawRepresentation
        let named = zip(listed.devices, roster).filter { $0.0.name == name }
        guard let (target, targetRoster) = named.first else {
            throw DeviceError.notSetUp(
                "no device of this account is named \"\(name)\"; `pixie devices` lists their names")
        }
        guard named.count == 1 else {
            throw DeviceError.notSetUp(
                "\(named.count) devices of this account are named \"\(name)\"; the server cannot tell which to "
                    + "remove by name, so nothing was removed")
        }
        guard targetRoster.pubkey != own else {
            throw DeviceError.notSetUp(
                "this is the device named \"\(name)\": a device does not remove itself; run `pixie signout` on it, "
                    + "or remove it from another device")
        }
        // Every device that stays gets a bundle, this one too: if the answer is lost, it takes its keys from there.
        let staying = try zip(listed.devices, roster).filter { $0.1.pubkey != targetRoster.pubkey }.map {
            device, entry in
            guard let sealing = entry.sealingKey, let key = try? XWing.PublicKey(rawRepresentation: sealing) else {
                throw DeviceError.notSetUp(
                    "the device \"\(device.name)\" enrolled before devices had sealing keys, so its new keys cannot be "
                        + "sealed to it; sign it in again first")
            }
            return AccountRotator.Staying(deviceID: device.deviceID, pubkey: entry.pubkey, sealingKey: key)
        }
        let prepared = try AccountRotator.prepare(
            AccountRotator.Request(
                ktHandle: membership.ktHandle, epoch: epoch, accountSeed: membership.accountSeed.data,
                remover: try state.identity,
                removed: targetRoster.pubkey, staying: staying, time: clock.now),
            random: environment.random)
        let authenticator = try SoftwareAuthenticator(state: state.passkey.data)
        let challenge = try await client.passkeyChallenge(.removeDevice, deviceID: target.deviceID)
        let assertion = try authenticator.getAssertion(
            rpID: challenge.rpID, origin: "https://\(challenge.rpID)", challenge: challenge.challenge.data,
            credentialID: authenticator.credentialIDs(rpID: challenge.rpID).first)
        let passkey = Base64URLBytes(authenticator.exportState())
        try home.update { $0.passkey = passkey }
        let removed = try await client.removeDevice(
            IdentityAPI.RemoveDeviceRequest(
                deviceID: target.deviceID, expectedEpoch: epoch,
                passkey: IdentityAPI.PasskeyAssertion(challengeID: challenge.challengeID, credential: assertion),
                rotation: prepared.rotation),
            session: session)
        // The server says it logged the rotation before it answered: keep the seeds only once the log proves them.
        // Otherwise the old ones stay, and the next followRotations takes the new ones from this device's own
        // bundle once the log holds them (as it would had the answer been lost).
        let logged = try await bindings.loggedEntry(KeyTransparencyLabel.account(ktHandle: membership.ktHandle))
        guard logged?.value == prepared.statement.newKey.rawRepresentation, logged?.version == removed.epoch else {
            throw RotationError.logDisagrees(
                "the server removed \"\(target.name)\" but the log does not show the rotation it answered with; this "
                    + "device keeps its keys and takes the new ones once the log holds them")
        }
        try BackupKeyring(home: home).adoptOwnKey(prepared.secrets.backupKey)
        try home.update { state in
            state.membership?.accountSeed = Base64URLBytes(prepared.secrets.accountSeed)
            state.membership?.discoverySeed = Base64URLBytes(prepared.secrets.discoverySeed)
            state.membership?.epoch = removed.epoch
        }
        return DeviceRemoval(
            removedDeviceID: target.deviceID, removedName: target.name, epoch: removed.epoch, bundles: staying.count)
    }

    /// Writes back the pin the log checks advanced, if the device is still set up here.
    private func keepPin() async throws {
        let pin = Base64URLBytes(await bindings.state)
        try home.update { $0.transparency = pin }
    }
}
