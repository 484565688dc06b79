import Foundation
import Sempere
import Testing

@Suite("Sempere join: six words each way")
struct JoinTests {
    /// The SempereError code `body` throws, or nil.
    static func code(_ body: () throws -> Any) -> SempereError.Code? {
        do {
            _ = try body()
            return nil
        } catch let error as SempereError {
            return error.code
        } catch {
            return nil
        }
    }

    @Test("a post-quantum vault refuses a device that asks with a classical key (a provider's downgrade)")
    func postQuantumDowngrade() throws {
        let home = DeviceKeys.generate(postQuantum: true)
        let created = try VaultHome.createVault(homeName: "iPad", credentials: home, postQuantum: true)
        // The provider showed the new device a vault.json that says "classical", so it made X25519 keys; its
        // request, words and signature are all genuine.
        let phone = DeviceKeys.generate(postQuantum: false)
        let request = try JoinRequest(name: "iPhone", credentials: phone)
        do {
            _ = try JoinApproval.approve(
                request, typedWords: request.words.description, vault: created.vault, home: VaultHome(credentials: home)
            )
            Issue.record("a classical key was admitted into a post-quantum vault")
        } catch let error as SempereError {
            #expect(error.code == .malformedVault)
            #expect(error.reason.contains("with a classical (X25519) key"), "\(error.reason)")
        }
        // The same device with a post-quantum key joins.
        let pqPhone = DeviceKeys.generate(postQuantum: true)
        let pqRequest = try JoinRequest(name: "iPhone", credentials: pqPhone)
        let (vault, _) = try JoinApproval.approve(
            pqRequest, typedWords: pqRequest.words.description, vault: created.vault, home: VaultHome(credentials: home)
        )
        #expect(vault.body.device(pqPhone.id) != nil)
    }

    @Test("a device joins: home finds its request by its words, the device checks home's words, then reads notes")
    func join() throws {
        let home = DeviceKeys.generate(postQuantum: false)
        let created = try VaultHome.createVault(homeName: "iPad", credentials: home, postQuantum: false)
        let phone = DeviceKeys.generate(postQuantum: false)
        let request = try JoinRequest(name: "iPhone", credentials: phone)
        let shownOnPhone = request.words.description

        // Home: another device's request is lying around too; the words pick the right one.
        let other = try JoinRequest(name: "Laptop", credentials: .generate(postQuantum: false))
        let found = try JoinRequest.matching(
            words: shownOnPhone.uppercased(),
            in: [try JoinRequest(parsing: other.encoded()), try JoinRequest(parsing: request.encoded())])
        #expect(found.body.requestID == request.body.requestID)
        let (vault, homeWords) = try JoinApproval.approve(
            found, typedWords: shownOnPhone, vault: created.vault, home: VaultHome(credentials: home))

        // Phone: types home's words; pins the vault; reads a note home writes.
        let pin = try JoinApproval.accept(
            typedWords: homeWords.description, vault: try SignedVault(parsing: vault.encoded()), request: request,
            credentials: phone)
        #expect(pin.vaultID == created.pin.vaultID && pin.generation == 2)
        let note = try VaultNote.seal(
            markdown: "welcome", path: "notes/\(home.id)/1.age", vault: vault.body, author: home)
        let keys = try VaultKeyring(vault: vault.body, credentials: phone)
        #expect(
            try VaultNote.open(note, path: "notes/\(home.id)/1.age", vault: vault.body, keyring: keys).markdown
                == "welcome")
    }

    @Test("wrong words, a request swapped after its words were shown, and a vault swapped in are all refused")
    func attacks() throws {
        let home = DeviceKeys.generate(postQuantum: false)
        let created = try VaultHome.createVault(homeName: "iPad", credentials: home, postQuantum: false)
        let phone = DeviceKeys.generate(postQuantum: false)
        let request = try JoinRequest(name: "iPhone", credentials: phone)
        let shown = request.words.description

        // Wrong words typed on home.
        let wrong = JoinWords.derive(from: Data("something else".utf8)).description
        #expect(Self.code { try JoinRequest.matching(words: wrong, in: [request]) } == .notFound)

        // The provider swaps the request for its own device's after the words were shown.
        let providerDevice = DeviceKeys.generate(postQuantum: false)
        let swapped = try JoinRequest(name: "iPhone", credentials: providerDevice)
        #expect(throws: (any Error).self) { try JoinRequest.matching(words: shown, in: [swapped]) }
        #expect(throws: (any Error).self) {
            try JoinApproval.approve(
                swapped, typedWords: shown, vault: created.vault, home: VaultHome(credentials: home))
        }

        // The real approval.
        let (vault, homeWords) = try JoinApproval.approve(
            request, typedWords: shown, vault: created.vault, home: VaultHome(credentials: home))

        // The provider builds a vault of its own, "approves" the phone into it, and shows it to the phone.
        let fake = try VaultHome.createVault(homeName: "iPad", credentials: providerDevice, postQuantum: false)
        let (fakeVault, _) = try JoinApproval.approve(
            request, typedWords: shown, vault: fake.vault, home: VaultHome(credentials: providerDevice))
        #expect(throws: (any Error).self) {
            try JoinApproval.accept(
                typedWords: homeWords.description, vault: fakeVault, request: request, credentials: phone)
        }
        // Wrong words typed on the phone.
        #expect(throws: (any Error).self) {
            try JoinApproval.accept(typedWords: wrong, vault: vault, request: request, credentials: phone)
        }
        // And the right ones work.
        #expect(
            try JoinApproval.accept(
                typedWords: homeWords.description, vault: vault, request: request, credentials: phone
            )
            .generation == 2)
    }
}
