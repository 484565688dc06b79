import Foundation
import PixieWire
import SiblingsCrypto
import Testing

/// The rotation statement and the rotation bundle (docs/pixie-protocol.md, "Revoking a device"): their bytes, and
/// the forgeries each must refuse.
@Suite("Account rotation: the signed statement and the sealed bundle")
struct AccountRotationTests {
    let old = HybridSignature.PrivateKey()
    let new = HybridSignature.PrivateKey()
    let discoveryValue = Data(repeating: 0xD1, count: 32 + 1216 + 22)
    let remover = HybridSignature.PrivateKey()
    let removed = Data(repeating: 0xBB, count: 1984)

    func rotation(epoch: UInt64 = 2, from: HybridSignature.PrivateKey? = nil) throws -> AccountRotation {
        try AccountRotation(
            ktHandle: "handle-0123456789abcdef", epoch: epoch, from: from ?? old, to: new,
            discoveryValue: discoveryValue, remover: remover, removed: removed,
            time: Date(timeIntervalSince1970: 1_800_000_000))
    }

    @Test("the statement's layout, and the value round-trips through the log's bytes")
    func layout() throws {
        let rotation = try rotation(epoch: 3)
        let statement = rotation.statement
        let context = Data("pixie/account-rotation/v1".utf8)
        #expect(statement.prefix(context.count) == context)
        #expect(statement.count == context.count + 1 + 2 + 23 + 8 + 1984 + 1984 + 32 + 32 + 32 + 8)
        #expect(rotation.encoded.count == statement.count + 1984 + 3 * 3373)
        #expect(rotation.encoded[statement.count..<(statement.count + 1984)] == remover.publicKey.rawRepresentation)
        let decoded = try AccountRotation(decoding: rotation.encoded)
        #expect(decoded == rotation)
        #expect(decoded.epoch == 3 && decoded.newKey == new.publicKey)
        #expect(decoded.removedKeyHash == Data(SHA256.hash(data: removed)))
        #expect(decoded.removerKeyHash == Data(SHA256.hash(data: remover.publicKey.rawRepresentation)))
        try decoded.verify(previousKey: old.publicKey)
        #expect(KeyTransparencyLabel.accountRotation(ktHandle: "h") == "account-rotation/h")
    }

    @Test("a contact refuses a rotation from another key, one the old key did not sign, or one changed after signing")
    func forgeries() throws {
        let rotation = try rotation()
        // A rotation that starts from a key the contact never knew (a server's own, say).
        let stranger = HybridSignature.PrivateKey()
        let elsewhere = try self.rotation(from: stranger)
        #expect(throws: PixieWireError.self) { try elsewhere.verify(previousKey: old.publicKey) }
        // The right starting key named, but sig_old made by another key: only the old key's holder can sign it.
        var bytes = rotation.encoded
        let statementCount = rotation.statement.count
        let forged = try stranger.signature(for: rotation.statement, context: AccountRotation.context)
        let sigOld = statementCount + 1984
        bytes.replaceSubrange(sigOld..<(sigOld + 3373), with: forged.rawRepresentation)
        let error = #expect(throws: PixieWireError.self) {
            try AccountRotation(decoding: bytes).verify(previousKey: old.publicKey)
        }
        #expect(error?.code == .badSignature)
        // sig_new missing its half: a new key that never signed is not taken.
        var unsignedNew = rotation.encoded
        unsignedNew.replaceSubrange(
            (sigOld + 3373)..<(sigOld + 2 * 3373),
            with: try stranger.signature(for: rotation.statement, context: AccountRotation.context).rawRepresentation)
        #expect(throws: PixieWireError.self) {
            try AccountRotation(decoding: unsignedNew).verify(previousKey: old.publicKey)
        }
        // A field changed after signing (the epoch, at offset context ‖ 0 ‖ u16 ‖ handle).
        var moved = rotation.encoded
        let epochOffset = AccountRotation.context.count + 1 + 2 + 23 + 7
        moved[epochOffset] ^= 1
        #expect(throws: PixieWireError.self) { try AccountRotation(decoding: moved).verify(previousKey: old.publicKey) }
        // Cut short, or with a byte more: not a rotation at all.
        for broken in [rotation.encoded.dropLast(), rotation.encoded + Data([0])] {
            let malformed = #expect(throws: PixieWireError.self) { try AccountRotation(decoding: Data(broken)) }
            #expect(malformed?.code == .malformed)
        }
        #expect(throws: (any Error).self) {
            try AccountRotation(
                ktHandle: "h", epoch: 1, from: old, to: new, discoveryValue: Data(), remover: remover,
                removed: removed, time: Date())
        }
    }

    @Test("the removed device, holding the old account key, cannot pass its own rotation off as another device's")
    func aRemoverIsWhoSigned() throws {
        // The removed device (`thief`) knows the old account key, so it can sign sig_old and sig_new of a statement
        // with seeds of its own. Without the remover's signature, naming the real remover's hash was enough.
        let thief = HybridSignature.PrivateKey()
        let posing = try AccountRotation(
            ktHandle: "handle-0123456789abcdef", epoch: 2, from: old, to: new, discoveryValue: discoveryValue,
            remover: thief, removed: thief.publicKey.rawRepresentation, time: Date())
        // Naming itself as the removed device, signed by itself: one device as both, refused.
        let both = #expect(throws: PixieWireError.self) { try posing.verify(previousKey: old.publicKey) }
        #expect(both?.code == .badSignature)
        // The real remover's key and hash put in, the thief's signature kept: the signature does not verify.
        let real = try rotation()
        var swapped = real.encoded
        let statementCount = real.statement.count
        let thiefs = try AccountRotation(
            ktHandle: real.ktHandle, epoch: 2, from: old, to: new, discoveryValue: discoveryValue, remover: thief,
            removed: removed, time: Date(timeIntervalSince1970: 1_800_000_000))
        #expect(throws: Never.self) { try thiefs.verify(previousKey: old.publicKey) }
        let sigRemover = statementCount + 1984 + 2 * 3373
        swapped.replaceSubrange(
            sigRemover..<(sigRemover + 3373),
            with: try thief.signature(for: real.statement, context: AccountRotation.removerContext).rawRepresentation)
        let wrongSigner = #expect(throws: PixieWireError.self) {
            try AccountRotation(decoding: swapped).verify(previousKey: old.publicKey)
        }
        #expect(wrongSigner?.code == .badSignature)
        // The thief's key carried whole beside the real remover's hash: the key is not the one named.
        var carried = real.encoded
        carried.replaceSubrange(
            statementCount..<(statementCount + 1984), with: thief.publicKey.rawRepresentation)
        #expect(throws: PixieWireError.self) {
            try AccountRotation(decoding: carried).verify(previousKey: old.publicKey)
        }
        // A device key's signature under the account context is not the remover's.
        var context = real.encoded
        context.replaceSubrange(
            sigRemover..<(sigRemover + 3373),
            with: try remover.signature(for: real.statement, context: AccountRotation.context).rawRepresentation)
        #expect(throws: PixieWireError.self) {
            try AccountRotation(decoding: context).verify(previousKey: old.publicKey)
        }
    }

    @Test("a bundle opens only for the device it was sealed to, and carries the four values")
    func bundle() throws {
        let rotation = try rotation(epoch: 2)
        let bundle = try RotationBundle(
            epoch: 2, ktHandle: rotation.ktHandle, accountSeed: Data(repeating: 1, count: 32),
            discoverySeed: Data(repeating: 2, count: 32), backupKey: Data(repeating: 3, count: 32),
            statementHash: Data(SHA256.hash(data: rotation.statement)))
        let laptop = XWing.PrivateKey()
        let laptopPubkey = Data(repeating: 0x11, count: 1984)
        let sealed = try bundle.seal(to: laptop.publicKey, device: laptopPubkey)
        #expect(sealed.first == 1)
        #expect(sealed.count == 1 + 1120 + 8 + 2 + 23 + 4 * 32 + 16)
        #expect(try RotationBundle.open(sealed, with: laptop, device: laptopPubkey) == bundle)
        // Another device's key, or this key presented for another device's bundle: it does not open.
        #expect(throws: PixieWireError.self) {
            try RotationBundle.open(sealed, with: XWing.PrivateKey(), device: laptopPubkey)
        }
        #expect(throws: PixieWireError.self) {
            try RotationBundle.open(sealed, with: laptop, device: Data(repeating: 0x12, count: 1984))
        }
        var flipped = sealed
        flipped[flipped.count - 1] ^= 1
        #expect(throws: PixieWireError.self) { try RotationBundle.open(flipped, with: laptop, device: laptopPubkey) }
        #expect(throws: PixieWireError.self) {
            try RotationBundle(
                epoch: 2, ktHandle: "h", accountSeed: Data(count: 31), discoverySeed: Data(count: 32),
                backupKey: Data(count: 32), statementHash: Data(count: 32))
        }
    }
}
