import Age
import Foundation
import Sempere
import SiblingsCrypto
import SiblingsTestSupport
import Testing

@Suite("Sempere recovery kit")
struct RecoveryKitTests {
    @Test("the printed secret round-trips, in either case, and a typo is caught")
    func printedSecret() throws {
        let kit = RecoveryKit(vaultID: "00112233445566778899aabbccddeeff")
        let printed = kit.secretString
        #expect(printed.hasPrefix("SEMPERE-KIT-1"))
        let back = try RecoveryKit(secretString: printed.lowercased(), vaultID: kit.vaultID)
        #expect(back.secretRepresentation == kit.secretRepresentation)
        var typo = Array(printed)
        typo[20] = typo[20] == "Q" ? "P" : "Q"
        #expect(throws: SempereError.self) { try RecoveryKit(secretString: String(typo), vaultID: kit.vaultID) }
    }

    @Test("the passphrase copy opens the recovery wrap with stock age -d -i, and gives Sempere the whole kit")
    func passphraseCopy() throws {
        let home = DeviceKeys.generate(postQuantum: false)
        let created = try VaultHome.createVault(homeName: "Mac", credentials: home, postQuantum: false)
        let body = created.vault.body
        let copy = try created.kit.passphraseCopy(
            passphrase: "correct horse battery staple", postQuantum: false, workFactor: 10)
        let wrap = try #require(body.currentEpoch.wraps["recovery"])

        // Stock age, through a pseudo-terminal for the passphrase.
        let oracle = try ReferenceOracle()
        let epochIdentity = try oracle.bytes(
            "age_decrypt", ["keyfile": copy, "file": Data(wrap.utf8), "passphrase": "correct horse battery staple"])
        let identity = try WrapIdentity(string: String(decoding: epochIdentity, as: UTF8.self))
        #expect(identity.recipientString == body.currentEpoch.recipient)

        // Sempere recovers the kit itself (signing key included) from the copy.
        let recovered = try RecoveryKit(
            passphraseCopy: copy, passphrase: "correct horse battery staple", vaultID: body.vaultID)
        #expect(recovered.secretRepresentation == created.kit.secretRepresentation)
        #expect(try recovered.signingKey().publicKey.rawRepresentation == body.recovery.signingKey)
        let wrong = #expect(throws: SempereError.self) {
            try RecoveryKit(passphraseCopy: copy, passphrase: "wrong", vaultID: body.vaultID)
        }
        #expect(wrong?.code == .wrongPassphrase)
    }

    @Test("the passphrase copy refuses a passphrase the provider could guess offline: short, or of few characters")
    func passphraseFloor() throws {
        let created = try VaultHome.createVault(
            homeName: "Mac", credentials: .generate(postQuantum: false), postQuantum: false)
        for weak in ["x", "hunter2", "fifteen chars!!", "aaaaaaaaaaaaaaaaaaaa", "1234123412341234"] {
            let error = expectSempereError(.weakPassphrase) {
                try created.kit.passphraseCopy(passphrase: weak, postQuantum: false, workFactor: 10)
            }
            #expect(error?.reason.contains("offline") == true, "\(weak)")
        }
        // Sixteen characters, eight or more of them different, pass.
        _ = try created.kit.passphraseCopy(passphrase: "sixteen chars ok", postQuantum: false, workFactor: 10)
    }
}
