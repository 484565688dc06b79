import Foundation
import Sempere
import SiblingsCrypto
import SiblingsTestSupport
import Testing

@Suite struct JoinWordsTests {
    /// The released word list, pinned: SHA-256 of the words, one per line, each ended by "\n".
    /// It must never change (docs/sempere-join-words.md); a new list is a new version with a new label.
    static let pinnedSHA256 = "a6589b6e9e4184125e4d26a3e06e8c874f4cac71d34c32ca63acb9347347f61a"

    @Test func listIsPinned() {
        let text = JoinWords.list.map { $0 + "\n" }.joined()
        #expect(SHA256.hash(data: Data(text.utf8)).description == Self.pinnedSHA256)
    }

    @Test func listKeepsTheRules() {
        let list = JoinWords.list
        #expect(list.count == 2048)
        #expect(list == list.sorted())
        #expect(Set(list).count == list.count)
        #expect(
            Set(list.map { $0.prefix(4) }).count == list.count, "every word is identified by its first four letters")
        for word in list {
            #expect((4...8).contains(word.count), "\(word)")
            #expect(word.utf8.allSatisfy { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) }, "\(word)")
        }
    }

    @Test func committedTextFileIsTheList() throws {
        let url = Vectors.packageRoot.appendingPathComponent("docs/sempere-join-words-v1.txt")
        let text = try String(contentsOf: url, encoding: .utf8)
        #expect(text == JoinWords.list.map { $0 + "\n" }.joined())
    }

    /// Re-runs scripts/make-wordlist.py --check: the rules on the committed list, and, when Debian's
    /// wamerican-small is the pinned version, that the rules still produce exactly the committed list.
    @Test func scriptRulesHold() throws {
        let script = Vectors.packageRoot.appendingPathComponent("scripts/make-wordlist.py").path
        let run = try runTool("/usr/bin/python3", [script, "--check"], install: "python3 and wamerican-small")
        #expect(run.status == 0, "\(run.stderr)")
        #expect(String(decoding: run.stdout, as: UTF8.self).contains("rules hold"))
    }

    @Test func bitsRoundTrip() throws {
        for _ in 0..<200 {
            var bytes = [UInt8](SecureRandom.bytes(count: 9))
            bytes[8] &= 0xC0
            let words = try JoinWords(bits: bytes)
            #expect(words.words.count == 6)
            #expect(words.bits == Data(bytes))
            #expect(try JoinWords(parsing: words.description) == words)
            #expect(try JoinWords(indices: words.indices) == words)
        }
        // Most significant bit first: all ones is the last word six times, 0x80... is word 1024 first.
        #expect(
            try JoinWords(bits: [UInt8](repeating: 0xFF, count: 8) + [0xC0]).indices == Array(repeating: 2047, count: 6)
        )
        #expect(try JoinWords(bits: [0x80] + [UInt8](repeating: 0, count: 8)).indices == [1024, 0, 0, 0, 0, 0])
        #expect(try JoinWords(bits: [0, 0, 0x04] + [UInt8](repeating: 0, count: 6)).indices == [0, 1, 0, 0, 0, 0])
    }

    @Test func badBits() {
        expectSempereError(.invalidEncoding) { try JoinWords(bits: [UInt8](repeating: 0, count: 8)) }
        expectSempereError(.invalidEncoding) { try JoinWords(bits: [UInt8](repeating: 0, count: 10)) }
        expectSempereError(.invalidEncoding) { try JoinWords(bits: [UInt8](repeating: 0, count: 8) + [0x01]) }
        expectSempereError(.invalidEncoding) { try JoinWords(indices: [0, 0, 0, 0, 0, 2048]) }
        expectSempereError(.wrongWordCount) { try JoinWords(indices: [0, 0, 0, 0, 0]) }
    }

    @Test func deriveHashesTheLabelAndTranscript() throws {
        let transcript = Data("request ‖ vault".utf8)
        let words = JoinWords.derive(from: transcript)
        var hash = SHA256()
        hash.update(data: Data("sempere.org/join-words/v1".utf8) + [0] + transcript)
        var expected = [UInt8](hash.finalize().rawRepresentation.prefix(9))
        expected[8] &= 0xC0
        #expect(words.bits == Data(expected))
        #expect(JoinWords.derive(from: transcript) == words)
        #expect(JoinWords.derive(from: transcript + [0]) != words)
        // A fixed vector, so a second implementation can check itself.
        #expect(JoinWords.derive(from: Data()).description == Self.emptyTranscriptWords)
    }

    /// Computed independently with Python's hashlib from the list in docs/sempere-join-words-v1.txt.
    static let emptyTranscriptWords = "person hall golf dabble vein mind"

    @Test func typingVariations() throws {
        let words = try JoinWords(indices: [0, 1, 2, 1000, 2046, 2047])
        let list = words.words
        #expect(try JoinWords(parsing: list.joined(separator: " ").uppercased()) == words)
        #expect(try JoinWords(parsing: "  " + list.joined(separator: "\t\n  ") + "\n") == words)
        #expect(try JoinWords(parsing: list.joined(separator: "-")) == words)
        #expect(try JoinWords(parsing: list.joined(separator: ", ")) == words)
        #expect(try JoinWords(parsing: list.map { String($0.prefix(4)) }.joined(separator: " ")) == words)
        #expect(try JoinWords(parsing: list.map { $0.capitalized }.joined(separator: " ")) == words)
        for (index, word) in JoinWords.list.enumerated() {
            let abbreviated = try JoinWords(
                parsing: Array(repeating: String(word.prefix(4)), count: 6).joined(separator: " "))
            #expect(abbreviated.indices == Array(repeating: index, count: 6))
        }
    }

    @Test("text past 1,024 bytes is refused before it is read, even when it holds the six words")
    func refusesLongText() throws {
        let words = try JoinWords(indices: [3, 4, 5, 6, 7, 8])
        let padded = words.description + String(repeating: " ", count: 1024 - words.description.utf8.count)
        #expect(try JoinWords(parsing: padded) == words)
        let error = expectSempereError(.wrongWordCount) { try JoinWords(parsing: padded + " ") }
        #expect(error?.reason.contains("1025 bytes") == true, "\(String(describing: error))")
    }

    @Test func rejectsUnknownWordsWithASuggestion() throws {
        let words = try JoinWords(indices: [10, 20, 30, 40, 50, 60]).words
        var typo = words
        let target = typo[2]
        typo[2] = String(target.dropLast()) + (target.last == "q" ? "x" : "q")
        let error = expectSempereError(.unknownWord) { try JoinWords(parsing: typo.joined(separator: " ")) }
        #expect(error?.reason.contains("word 3") == true, "\(String(describing: error))")
        #expect(error?.reason.contains("did you mean \"\(target)\"") == true, "\(String(describing: error))")
        expectSempereError(.unknownWord) {
            try JoinWords(parsing: "zzzzzz " + words.dropFirst().joined(separator: " "))
        }
        expectSempereError(.unknownWord) { try JoinWords(parsing: "ñame " + words.dropFirst().joined(separator: " ")) }
        expectSempereError(.wrongWordCount) { try JoinWords(parsing: words.dropFirst().joined(separator: " ")) }
        // The example in docs/sempere-join-words.md.
        let documented = expectSempereError(.unknownWord) {
            try JoinWords(parsing: "abet abort ferrq zipper zipper zipper")
        }
        #expect(documented?.reason.hasPrefix("word 3, \"ferrq\", is not a join word; did you mean \"ferry\"?") == true)
        expectSempereError(.wrongWordCount) { try JoinWords(parsing: "") }
        let ambiguous = expectSempereError(.ambiguousWord) {
            try JoinWords(parsing: "a " + words.dropFirst().joined(separator: " "))
        }
        #expect(ambiguous?.reason.contains("four always suffice") == true)
    }
}
