import Foundation
import Sempere
import SiblingsCrypto
import Testing

@Suite("Sempere join: six words each way")
struct JoinTests {
    @Test("a post-quantum vault refuses a device that asks with a classical key (a provider's downgrade)")
    func postQuantumDowngrade() throws {
        let home = DeviceKeys.generate(postQuantum: true)
        let created = try VaultHome.createVault(homeName: "iPad", credentials: home, postQuantum: true)
        // The provider showed the new device a vault.json that says "classical", so it made X25519 keys; its
        // request, words and signature are all genuine.
        let phone = DeviceKeys.generate(postQuantum: false)
        let request = try JoinRequest(name: "iPhone", credentials: phone)
        let error = expectSempereError(.malformedVault) {
            try JoinApproval.approve(
                request, typedWords: request.words.description, vault: created.vault, home: VaultHome(credentials: home)
            )
        }
        #expect(error?.reason.contains("with a classical (X25519) key") == true, "\(String(describing: error))")
        // The same device with a post-quantum key joins.
        let pqPhone = DeviceKeys.generate(postQuantum: true)
        let pqRequest = try JoinRequest(name: "iPhone", credentials: pqPhone)
        let approved = try JoinApproval.approve(
            pqRequest, typedWords: pqRequest.words.description, vault: created.vault, home: VaultHome(credentials: home)
        )
        #expect(approved.vault.body.device(pqPhone.id) != nil)
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
        let approved = try JoinApproval.approve(
            found, typedWords: shownOnPhone, vault: created.vault, home: VaultHome(credentials: home))
        #expect(!approved.alreadyListed && approved.device.id == phone.id)

        // Phone: types home's words; pins the vault; reads a note home writes.
        let pin = try JoinApproval.accept(
            typedWords: approved.words.description, vault: try SignedVault(parsing: approved.vault.encoded()),
            request: request, credentials: phone)
        #expect(pin.vaultID == created.pin.vaultID && pin.generation == 2)
        let vault = approved.vault
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
        expectSempereError(.notFound) { try JoinRequest.matching(words: wrong, in: [request]) }

        // The provider swaps the request for its own device's after the words were shown.
        let providerDevice = DeviceKeys.generate(postQuantum: false)
        let swapped = try JoinRequest(name: "iPhone", credentials: providerDevice)
        let notFound = expectSempereError(.notFound) { try JoinRequest.matching(words: shown, in: [swapped]) }
        #expect(notFound?.reason.contains("no join request here shows the words") == true)
        let notThese = expectSempereError(.notFound) {
            try JoinApproval.approve(
                swapped, typedWords: shown, vault: created.vault, home: VaultHome(credentials: home))
        }
        #expect(notThese?.reason.contains("not the words of this request") == true)

        // The real approval.
        let approved = try JoinApproval.approve(
            request, typedWords: shown, vault: created.vault, home: VaultHome(credentials: home))

        // The provider builds a vault of its own, "approves" the phone into it, and shows it to the phone.
        let fake = try VaultHome.createVault(homeName: "iPad", credentials: providerDevice, postQuantum: false)
        let fakeApproved = try JoinApproval.approve(
            request, typedWords: shown, vault: fake.vault, home: VaultHome(credentials: providerDevice))
        expectSempereError(.wrongVault) {
            try JoinApproval.accept(
                typedWords: approved.words.description, vault: fakeApproved.vault, request: request,
                credentials: phone)
        }
        // Home's real code against the fake vault is refused too.
        expectSempereError(.wrongVault) {
            try JoinApproval.accept(
                .code(approved.code), vault: fakeApproved.vault, request: request, credentials: phone)
        }
        // Wrong words typed on the phone.
        expectSempereError(.wrongVault) {
            try JoinApproval.accept(typedWords: wrong, vault: approved.vault, request: request, credentials: phone)
        }
        // And the right ones work.
        #expect(
            try JoinApproval.accept(
                typedWords: approved.words.description, vault: approved.vault, request: request, credentials: phone
            )
            .generation == 2)
    }

    @Test("the full-strength path: home takes the new device's pasted code, and the device takes home's")
    func codes() throws {
        let home = DeviceKeys.generate(postQuantum: false)
        let created = try VaultHome.createVault(homeName: "iPad", credentials: home, postQuantum: false)
        let phone = DeviceKeys.generate(postQuantum: false)
        let request = try JoinRequest(name: "iPhone", credentials: phone)
        #expect(request.code.hasPrefix("sempere-join-request:") && request.code.count == 21 + 43)

        // A substitute whose six words matched would still have another code: the code is all 256 bits.
        let substitute = try JoinRequest(name: "iPhone", credentials: .generate(postQuantum: false))
        expectSempereError(.notFound) { try JoinRequest.matching(code: request.code, in: [substitute]) }
        let found = try JoinRequest.matching(code: "  \(request.code)\n", in: [substitute, request])
        #expect(found.digest == request.digest)
        // A cut-off paste is refused, saying what a code looks like.
        let cut = expectSempereError(.invalidEncoding) {
            try JoinRequest.matching(code: String(request.code.dropLast(3)), in: [request])
        }
        #expect(cut?.reason.contains("copy the whole line") == true)

        let approved = try JoinApproval.approve(found, vault: created.vault, home: VaultHome(credentials: home))
        #expect(approved.code.hasPrefix("sempere-join-approval:"))
        // Home's code for another request is refused by the phone.
        let otherCode = JoinApproval.code(
            vaultID: created.vault.body.vaultID, homeKey: home.publicKey.rawRepresentation, request: substitute)
        expectSempereError(.wrongVault) {
            try JoinApproval.accept(.code(otherCode), vault: approved.vault, request: request, credentials: phone)
        }
        let pin = try JoinApproval.accept(
            .code(approved.code), vault: approved.vault, request: request, credentials: phone)
        #expect(pin.generation == 2)
    }

    @Test("the new device's words expire: an old request is refused, and home approves a new one of the same device")
    func requestsExpire() throws {
        let home = DeviceKeys.generate(postQuantum: false)
        let created = try VaultHome.createVault(homeName: "iPad", credentials: home, postQuantum: false)
        let phone = DeviceKeys.generate(postQuantum: false)
        let madeAt = Date(timeIntervalSince1970: 1_800_000_000)
        let request = try JoinRequest(name: "iPhone", credentials: phone, now: madeAt)
        #expect(request.expiresAt == madeAt.addingTimeInterval(JoinRequest.lifetime))
        let approved = try JoinApproval.approve(
            request, typedWords: request.words.description, vault: created.vault, home: VaultHome(credentials: home),
            now: madeAt.addingTimeInterval(60))

        // Home's words typed a second before the end are accepted; a second after, refused, however genuine.
        let inTime = madeAt.addingTimeInterval(JoinRequest.lifetime - 1)
        #expect(
            try JoinApproval.accept(
                typedWords: approved.words.description, vault: approved.vault, request: request, credentials: phone,
                now: inTime
            ).generation == 2)
        let late = expectSempereError(.expired) {
            try JoinApproval.accept(
                typedWords: approved.words.description, vault: approved.vault, request: request, credentials: phone,
                now: madeAt.addingTimeInterval(JoinRequest.lifetime + 1))
        }
        #expect(late?.reason.contains("Ask again") == true)
        // A request dated far in the future (a clock that was wrong) is not valid either.
        #expect(!request.isValid(at: madeAt.addingTimeInterval(-3600)))
        // Home refuses the old request by its own clock too: the time is in the hashed body, so a substitute
        // with the same words must carry a fresh time, and the search for one has only the window.
        let stale = expectSempereError(.expired) {
            try JoinApproval.approve(
                request, vault: created.vault, home: VaultHome(credentials: home),
                now: madeAt.addingTimeInterval(JoinRequest.lifetime + 1))
        }
        #expect(stale?.reason.contains("ask again from the new device") == true)

        // The device asks again: a new nonce, new words. Home, which listed it already, changes nothing and
        // shows the words for the new request, which the device accepts.
        let again = try JoinRequest(name: "iPhone", credentials: phone, now: madeAt.addingTimeInterval(900))
        #expect(again.body.nonce != request.body.nonce && again.words != request.words)
        let reapproved = try JoinApproval.approve(
            again, typedWords: again.words.description, vault: approved.vault, home: VaultHome(credentials: home),
            now: madeAt.addingTimeInterval(930))
        #expect(reapproved.alreadyListed && reapproved.vault.bodySHA256 == approved.vault.bodySHA256)
        #expect(
            try JoinApproval.accept(
                typedWords: reapproved.words.description, vault: reapproved.vault, request: again, credentials: phone,
                now: madeAt.addingTimeInterval(960)
            ).generation == 2)
        // The timestamp is signed: a request whose created_at was changed fails its self-signature.
        var body = String(decoding: try request.encoded(), as: UTF8.self)
        body = body.replacingOccurrences(of: "\(request.body.createdAt)", with: "\(request.body.createdAt + 900)")
        expectSempereError(.badSignature) { try JoinRequest(parsing: Data(body.utf8)) }
    }

    @Test("a join request of the earlier format (words that never expire) is refused with what to do")
    func earlierRequestFormat() throws {
        let request = try JoinRequest(name: "iPhone", credentials: .generate(postQuantum: false))
        let v1 = String(decoding: try request.encoded(), as: UTF8.self).replacingOccurrences(
            of: JoinRequest.format, with: "sempere-join-request-v1")
        let error = expectSempereError(.malformedVault) { try JoinRequest(parsing: Data(v1.utf8)) }
        #expect(error?.reason.contains("ask again from the new device") == true)
    }
}
