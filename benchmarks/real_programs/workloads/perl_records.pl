# Perl workload of the real-program comparison: hashes, arrays and strings.
#
#   perl perl_records.pl records_N.tsv
#
# Reads the records, counts words and bigrams in hashes, indexes records by group and tag in
# hashes of arrays, rewrites every text with regular expressions and sprintf, sorts, and
# prints counts and MD5 digests: the same bytes under every allocator.
use strict;
use warnings;
use Digest::MD5 qw(md5_hex);

my (%word_count, %bigram_count, %by_group, %by_tag, @rows);
open(my $in, '<', $ARGV[0]) or die "cannot read $ARGV[0]: $!";
while (my $line = <$in>) {
  chomp $line;
  my ($id, $name, $group, $score, $tags, $text) = split /\t/, $line;
  my @words = split / /, $text;
  $word_count{$_}++ for @words;
  $bigram_count{"$words[$_ - 1] $words[$_]"}++ for 1 .. $#words;
  my %row = (id => $id, name => $name, group => $group, score => $score,
             tags => [split /,/, $tags], text => $text);
  push @{ $by_group{$group} }, \%row;
  push @{ $by_tag{$_} }, $id for @{ $row{tags} };
  push @rows, \%row;
}
close $in;

my $rewritten = '';
for my $row (@rows) {
  (my $text = $row->{text}) =~ s/\b(\w)(\w*)/\U$1\E$2/g;
  $text =~ s/([aeiou])\1/$1/g;
  $rewritten .= sprintf("%08d %-30s %s\n", $row->{id}, lc $row->{name}, $text);
}

my @top_words = (sort { $word_count{$b} <=> $word_count{$a} || $a cmp $b } keys %word_count)[0 .. 9];
my @by_score = sort { $a->{score} <=> $b->{score} || $a->{id} <=> $b->{id} } @rows;
my $groups = join "\n", map {
  my $members = $by_group{$_};
  my $total = 0;
  $total += $_->{score} for @$members;
  "$_ " . scalar(@$members) . " $total " . join(',', map { $_->{name} } @$members[0 .. 2 < $#$members ? 2 : $#$members]);
} sort keys %by_group;
my $tags = join "\n", map { "$_ " . join(',', sort { $a <=> $b } @{ $by_tag{$_} }) } sort keys %by_tag;

print "records ", scalar(@rows), " words ", scalar(keys %word_count), " bigrams ",
      scalar(keys %bigram_count), "\n";
print "top words ", join(' ', map { "$_=$word_count{$_}" } @top_words), "\n";
print "lowest $by_score[0]{id} highest $by_score[-1]{id}\n";
print "rewritten ", md5_hex($rewritten), " ", length($rewritten), "\n";
print "groups ", md5_hex($groups), "\n";
print "tags ", md5_hex($tags), "\n";
