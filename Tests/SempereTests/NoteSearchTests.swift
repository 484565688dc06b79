import Foundation
import Sempere
import Testing

/// `sempere search`: every word, anywhere in the note, without case or accents; each match with its title and
/// its lines in context (issue 42: "Search matches one line, as one substring").
@Suite("Sempere: searching notes")
struct NoteSearchTests {
    static let shopping = (id: "a1", title: "Shopping", markdown: "# Shopping\n\nmilk\nbread\n\neggs\nCafé crème\n")

    @Test("every word must be in the note, on any line, in any order, without case or accents")
    func wordsAcrossLines() throws {
        let notes = [Self.shopping, (id: "b2", title: "Plans", markdown: "# Plans\nmilk the cows on Sunday\n")]
        let rows: [(String, [String])] = [
            ("milk", ["a1", "b2"]),
            ("BREAD milk", ["a1"]),  // two lines of one note: the old search found neither as one substring
            ("milk sunday", ["b2"]),
            ("cafe CREME", ["a1"]),  // accents and case folded
            ("milk butter", []),
            ("plans", ["b2"]),  // the title is the note's first line
        ]
        for (query, expected) in rows {
            #expect(try NoteSearch(query).matches(in: notes).map(\.id) == expected, "\(query)")
        }
        #expect(throws: SempereError.self) { try NoteSearch("  \n ") }
    }

    @Test("each line with a word comes with the line before and after it, overlapping runs merged")
    func context() throws {
        let match = try #require(try NoteSearch("milk eggs").matches(in: [Self.shopping]).first)
        #expect(match.title == "Shopping")
        // Lines 3 (milk) and 6 (eggs): 2–4 and 5–7 touch, so they are one run.
        #expect(match.excerpts.count == 1)
        #expect(match.excerpts[0].map(\.line) == [2, 3, 4, 5, 6, 7])
        #expect(match.excerpts[0].filter(\.matches).map(\.text) == ["milk", "eggs"])
        let apart = (id: "c3", title: "Far", markdown: "# Far\nmilk\n1\n2\n3\n4\neggs")
        let runs = try #require(try NoteSearch("milk eggs").matches(in: [apart]).first).excerpts
        #expect(runs.map { $0.map(\.line) } == [[1, 2, 3], [6, 7]])
    }

    @Test("many notes, searched in chunks on every core, come back in their order")
    func order() throws {
        let notes = (0..<1_000).map { index in
            (
                id: String(format: "%04d", index), title: "Note \(index)",
                markdown: index % 3 == 0 ? "tea\nand toast" : "coffee"
            )
        }
        let found = try NoteSearch("TOAST tea").matches(in: notes).map(\.id)
        #expect(found == notes.indices.filter { $0 % 3 == 0 }.map { String(format: "%04d", $0) })
    }
}
